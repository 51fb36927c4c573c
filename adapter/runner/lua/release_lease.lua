-- release_lease.lua: delete a lease only when it is still this node's.
--
-- KEYS[1] the run's lease  ARGV[1] this node's id
-- Replies 1 (released) or 0 (not this node's).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
