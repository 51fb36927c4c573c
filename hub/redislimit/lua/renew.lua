-- renew.lua (run by redisclaims.Script, whose prelude sets now): move the lapse
-- of the given claims TTL ahead. XX: a claim released meanwhile is not
-- brought back.
--
-- KEYS[1] the subject's sorted set
-- ARGV[1] TTL ms  ARGV[2..] socket ids
local at = now + tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', at, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
