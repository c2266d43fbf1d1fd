-- Shared by the scripts that meet typed locks (prepended to them). A
-- reentrant or read-write lock is a hash on each node. Its entries are the
-- holders: owner value -> expiry in milliseconds on this node's clock. An
-- owner value always contains a colon (Client id ':' random part) and a
-- metadata field never does, so no Client name can make one look like the
-- other. Metadata: '#kind' ('reentrant' or 'rw'), '#holder' (reentrant:
-- the hold's name, the owner value of its first entry), '#mode' (rw: 'r'
-- or 'w'), '#intent' (rw: until when a refused writer keeps new readers
-- out). The key lives as long as its longest entry or intent: it is kept
-- with no entry while a writer's intent is live, and deleted after that.
-- A plain lock is a string.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- is_entry reports whether field f of a typed lock's hash is a holder's.
local function is_entry(f)
  return string.find(f, ':', 1, true) ~= nil
end

-- settle deletes k's expired entries and sets k's TTL to its longest live
-- entry or writer intent; k is deleted when neither is left. Returns how
-- many entries are left.
local function settle(k, now)
  local all = redis.call('HGETALL', k)
  local n, top = 0, 0
  for i = 1, #all, 2 do
    if is_entry(all[i]) then
      local e = tonumber(all[i + 1]) or 0
      if e <= now then
        redis.call('HDEL', k, all[i])
      else
        n = n + 1
        if e > top then top = e end
      end
    end
  end
  local w = tonumber(redis.call('HGET', k, '#intent') or '0') or 0
  if w > top then top = w end
  if top <= now then
    redis.call('DEL', k)
    return 0
  end
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
-- said). Returns whether no holder is left (a typed lock may have others;
-- a writer's intent may keep the key).
local function drop(k, owner, is_plain)
  if is_plain then
    redis.call('DEL', k)
    return true
  end
  redis.call('HDEL', k, owner)
  return settle(k, now_ms()) == 0
end

-- typed_hash returns k's entries left after settle, or an error reply if
-- k is not absent and not a typed lock of kind, or nil and 1 if owner
-- already holds k (this attempt, sent again: its lease is renewed).
local function typed_hash(k, kind, owner, ttl, now)
  local t = redis.call('TYPE', k)['ok']
  if t == 'none' then
    return 0
  end
  if t ~= 'hash' or redis.call('HGET', k, '#kind') ~= kind then
    return nil, redis.error_reply('REDLOCKTYPE ' .. k .. ' is not a ' .. kind .. ' lock')
  end
  if redis.call('HEXISTS', k, owner) == 1 then
    renew(k, owner, ttl, false)
    return nil, 1
  end
  return settle(k, now)
end
