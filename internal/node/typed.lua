-- Shared by the scripts that meet typed locks (prepended to them). A
-- reentrant or read-write lock is a hash: one field per holder, its owner
-- value -> its expiry in milliseconds on this node's clock, and fields
-- beginning with '#' that describe the lock: '#kind' ('reentrant' or 'rw'),
-- '#holder' (reentrant: the hold's name, the owner value of its first
-- entry), '#mode' (rw: 'r' or 'w'), '#intent' (rw: until when a refused
-- writer keeps new readers out). The key lives as long as its longest
-- entry and is deleted with its last one. A plain lock is a string.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- settle deletes k's expired entries, then k itself if none is left, or
-- sets its TTL to its longest entry (or writer intent). Returns how many
-- entries are left.
local function settle(k, now)
  local all = redis.call('HGETALL', k)
  local n, top = 0, 0
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 1) ~= '#' then
      local e = tonumber(all[i + 1]) or 0
      if e <= now then
        redis.call('HDEL', k, all[i])
      else
        n = n + 1
        if e > top then top = e end
      end
    end
  end
  if n == 0 then
    redis.call('DEL', k)
    return 0
  end
  local w = tonumber(redis.call('HGET', k, '#intent') or '0') or 0
  if w > top then top = w end
  redis.call('PEXPIRE', k, top - now)
  return n
end

-- plain returns true and k's value if k is a string or absent, false if
-- it is a typed lock's hash. Any other error (an ACL refusing GET) is
-- raised: a plain lock needs only GET, and a typed one never hides it.
local function plain(k)
  local v = redis.pcall('GET', k)
  if type(v) == 'table' and v['err'] then
    if string.find(v['err'], 'WRONGTYPE', 1, true) then
      return false
    end
    error(v)
  end
  return true, v
end

-- holds reports whether k holds owner (a plain lock's value, or a live
-- entry of a typed lock) and whether k is a plain lock, for renew and drop.
local function holds(k, owner)
  local ok, v = plain(k)
  if ok then
    return v == owner, true
  end
  local e = redis.call('HGET', k, owner)
  return type(e) == 'string' and (tonumber(e) or 0) > now_ms(), false
end

-- renew resets the TTL of owner's hold of k (which holds it; is_plain as
-- holds said) to ttl ms.
local function renew(k, owner, ttl, is_plain)
  if is_plain then
    redis.call('PEXPIRE', k, ttl)
    return
  end
  local now = now_ms()
  redis.call('HSET', k, owner, now + tonumber(ttl))
  settle(k, now)
end

-- drop deletes owner's hold of k (which holds it; is_plain as holds
-- said). Returns whether k is gone (a typed lock may have other holders
-- left).
local function drop(k, owner, is_plain)
  if is_plain then
    redis.call('DEL', k)
    return true
  end
  redis.call('HDEL', k, owner)
  return settle(k, now_ms()) == 0
end
