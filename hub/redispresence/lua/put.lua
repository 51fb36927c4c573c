-- put.lua (run by redisclaims.Script, whose prelude sets now): set this hub's
-- field of a target's hash with its lapse time.
--
-- KEYS[1] the hash
-- ARGV[1] field  ARGV[2] TTL ms  ARGV[3] entry
redis.call('HSET', KEYS[1], ARGV[1], (now + tonumber(ARGV[2])) .. '|' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 3)
return 1
