-- claim.lua (run by redisclaims.Script, whose prelude sets now): drop lapsed
-- claims, refuse one past the limit (ARGV[3] > 0) and add the socket.
--
-- KEYS[1] the subject's sorted set
-- ARGV[1] socket id  ARGV[2] TTL ms  ARGV[3] limit
-- Replies 1 (claimed) or 0 (refused).
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local limit = tonumber(ARGV[3])
if limit > 0 and redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
