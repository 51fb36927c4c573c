-- create_session.lua: register a new session and list it under its owner.
--
-- KEYS[1] session hash  KEYS[2] owner's session list
-- ARGV[1] id  ARGV[2] owner  ARGV[3] title  ARGV[4] created_at
--
-- Replies 1 when created, 0 when the id is taken.

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'owner', ARGV[2], 'title', ARGV[3], 'created_at', ARGV[4])
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
