-- Publish a TTL in the node's TTL register (TTLRegisterKey): a hash whose
-- fields are lock TTLs in milliseconds ("d" before the number for a Client
-- with durable votes) and whose values are the expiry of each entry in
-- milliseconds on this node's clock (TIME). An entry is only ever raised
-- here; entries whose expiry has passed are deleted on every publish, and
-- the key expires with its latest entry (PEXPIREAT), so the register
-- describes only the locks that may still be held. A durable publish also
-- stamps KEYS[2] (a hash that never expires, two fields): "aof" names this
-- process (run_id) and "prev" the one "aof" named before, when it was
-- another: found in a later process, they show that it loaded this one's
-- append-only file, which this one had loaded from the one before.
-- KEYS[1] the register, KEYS[2] the stamp (durable publishes only), ARGV[1] a TTL in milliseconds, ARGV[2] how long
-- the entry must live from now, in milliseconds, ARGV[3] "d" for a durable
-- publish, else "".
-- Returns 1.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = now + tonumber(ARGV[2])
local field = (ARGV[3] or '') .. ARGV[1]
local cur = tonumber(redis.call('HGET', KEYS[1], field) or '0') or 0
if cur < exp then
  redis.call('HSET', KEYS[1], field, string.format('%.0f', exp))
end
if ARGV[3] == 'd' then
  local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
  local cur = redis.call('HGET', KEYS[2], 'aof')
  if run and cur ~= run then
    if cur then
      redis.call('HSET', KEYS[2], 'prev', cur)
    else
      redis.call('HDEL', KEYS[2], 'prev')
    end
    redis.call('HSET', KEYS[2], 'aof', run)
  end
end
local last = math.max(cur, exp)
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local e = tonumber(all[i + 1]) or 0
  if e <= now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif e > last then
    last = e
  end
end
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', last))
return 1
