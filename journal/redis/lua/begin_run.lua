-- begin_run.lua: register a run as its session's newest and active run.
--
-- KEYS[1] session hash   KEYS[2] session run list
-- KEYS[3] run meta hash  KEYS[4] active-runs set
-- KEYS[5] the session's status feed shard
--
-- ARGV[1] run id  ARGV[2] session id  ARGV[3] owner ("" = the session's)
-- ARGV[4] created_at  ARGV[5] request (redacted JSON, may be "")
-- ARGV[6] approximate MAXLEN of the feed shard  ARGV[7] the feed record
-- type announcing a session change (journal.SessionChanged): other nodes
-- see the queued run before any event of it is journaled
-- ARGV[8] "1" for BeginRunUpdate, else "" (then ARGV[9..] and KEYS[6] are
-- unused)  ARGV[9], ARGV[10] the session's state and title fields as the
-- caller read them ("" when absent)  ARGV[11], ARGV[12] their new values
-- ARGV[13] "1" when the new state has a queue, else "0"
-- KEYS[6] the shard's set of sessions with queued messages
--
-- Replies "ok", "notfound" (no session), "exists" (run id taken) or
-- "conflict" (the session has an active run), or "changed" (BeginRunUpdate:
-- the session's state is no longer what the caller read: read again). The session's active_run is
-- cleared by append.lua in the same script that journals the terminal
-- event, so a set active_run always names a run without one.

local sess = redis.call('HMGET', KEYS[1], 'owner', 'active_run')
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'notfound'
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 'exists'
end
if sess[2] and sess[2] ~= '' then
  return 'conflict'
end
if ARGV[8] == '1' then
  local cur = redis.call('HMGET', KEYS[1], 'state', 'title')
  if (cur[1] or '') ~= ARGV[9] or (cur[2] or '') ~= ARGV[10] then
    return 'changed'
  end
  redis.call('HSET', KEYS[1], 'state', ARGV[11], 'title', ARGV[12])
  if ARGV[13] == '1' then
    redis.call('SADD', KEYS[6], ARGV[2])
  else
    redis.call('SREM', KEYS[6], ARGV[2])
  end
end
local owner = ARGV[3]
if owner == '' then
  owner = sess[1] or ''
end
redis.call('HSET', KEYS[3], 'id', ARGV[1], 'session_id', ARGV[2], 'owner', owner,
  'created_at', ARGV[4], 'request', ARGV[5], 'last_seq', 0)
redis.call('HSET', KEYS[1], 'active_run', ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[6], '*', 's', ARGV[2], 't', ARGV[7])
return 'ok'
