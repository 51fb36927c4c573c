-- create_session.lua: register a new session and list it under its owner.
--
-- KEYS[1] session hash  KEYS[2] owner's session list
-- KEYS[3] the session's status feed shard
-- ARGV[1] id  ARGV[2] owner  ARGV[3] title  ARGV[4] created_at
-- ARGV[5] approximate MAXLEN of the feed shard  ARGV[6] the feed record
-- type announcing a session change (journal.SessionChanged)
--
-- Replies 1 when created, 0 when the id is taken.

if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'owner', ARGV[2], 'title', ARGV[3], 'created_at', ARGV[4])
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 's', ARGV[1], 't', ARGV[6])
return 1
