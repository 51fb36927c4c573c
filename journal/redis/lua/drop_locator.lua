-- drop_locator.lua: remove a run's locator only if it still names the
-- given shard.
--
-- KEYS[1] the run's locator  ARGV[1] shard number
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
