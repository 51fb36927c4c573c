-- drop_queued.lua: remove a session from its shard's set of sessions with
-- queued messages, unless it (still) has some.
--
-- KEYS[1] session hash  KEYS[2] the shard's queued-sessions set
-- ARGV[1] session id
--
-- Replies 1 when it removed the session, else 0.

if redis.call('HEXISTS', KEYS[1], 'id') == 1 and
   string.find(redis.call('HGET', KEYS[1], 'state') or '', '"queue":[{', 1, true) then
  return 0
end
return redis.call('SREM', KEYS[2], ARGV[1])
