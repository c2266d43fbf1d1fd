-- Fair lock: a waiter that gave up leaves the queue. KEYS[1] the queue,
-- KEYS[2] the places' expiries; ARGV[1] the waiter's id. Returns 1.
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
