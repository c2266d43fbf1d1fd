-- The process guard, run after the command's own script is defined as
-- body (see guard.go): ARGV[1] is the run_id of the server process this
-- Client's votes on the node are bound to. A node that runs another
-- process (it restarted, a proxy reconnected to it, a replica was
-- promoted) may have lost locks that are still held: it refuses before
-- writing anything, and names its own process. The command's own
-- arguments follow ARGV[1].
local info = redis.call('INFO', 'server')
if not string.find(info, 'run_id:' .. ARGV[1], 1, true) then
  return redis.error_reply('REDLOCKPROC ' .. (string.match(info, 'run_id:(%x+)') or 'unknown'))
end
local argv = {}
for i = 2, #ARGV do
  argv[i - 1] = ARGV[i]
end
return body(KEYS, argv)
