-- renew_lease.lua: extend a lease only when it is still this node's.
--
-- KEYS[1] the run's lease  ARGV[1] this node's id  ARGV[2] the TTL in ms
-- Replies 1 (renewed) or 0 (lapsed, or another node's since: the run is
-- not this node's any more).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
