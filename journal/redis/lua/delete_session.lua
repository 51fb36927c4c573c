-- delete_session.lua: remove a session without an active run, with every
-- run of it, and announce the change on its feed shard.
--
-- KEYS[1] session hash  KEYS[2] session run list  KEYS[3] owner's session list
-- KEYS[4] ended-runs zset  KEYS[5] active-runs set  KEYS[6] the session's feed shard
-- KEYS[7..] per run, in the order of ARGV[5..]: meta hash, event stream,
-- idempotency hash
-- ARGV[1] session id  ARGV[2] owner  ARGV[3] approximate MAXLEN of the feed
-- shard  ARGV[4] the feed record type (journal.SessionChanged)
-- ARGV[5..] the session's run ids as the caller read them
--
-- Replies "ok", "notfound", "conflict" (an active run) or "retry" (the
-- owner or the run list is not what the caller read: read again).

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'notfound'
end
local sess = redis.call('HMGET', KEYS[1], 'owner', 'active_run')
if sess[2] and sess[2] ~= '' then
  return 'conflict'
end
if (sess[1] or '') ~= ARGV[2] then
  return 'retry'
end
local runs = redis.call('LRANGE', KEYS[2], 0, -1)
local n = #ARGV - 4
if #runs ~= n then
  return 'retry'
end
for i = 1, n do
  if runs[i] ~= ARGV[4 + i] then
    return 'retry'
  end
end
for i = 1, n do
  local b = 6 + (i - 1) * 3
  redis.call('DEL', KEYS[b + 1], KEYS[b + 2], KEYS[b + 3])
  redis.call('ZREM', KEYS[4], ARGV[4 + i])
  redis.call('SREM', KEYS[5], ARGV[4 + i])
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('LREM', KEYS[3], 0, ARGV[1])
redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[3], '*', 's', ARGV[1], 't', ARGV[4])
return 'ok'
