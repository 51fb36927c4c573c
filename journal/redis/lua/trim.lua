-- trim.lua: delete one terminal run whose terminal event is older than a
-- cutoff: its meta, events and idempotency keys, its place in its session
-- and in the ended-runs index.
--
-- KEYS[1] run meta hash  KEYS[2] run event stream  KEYS[3] run idempotency hash
-- KEYS[4] ended-runs zset  KEYS[5] the session's run list
-- ARGV[1] run id  ARGV[2] session id  ARGV[3] cutoff (terminal_at < cutoff)
--
-- Replies 1 when trimmed, 0 otherwise. A run that is not terminal is never
-- touched; an index entry without a run is dropped.

local meta = redis.call('HMGET', KEYS[1], 'session_id', 'terminal', 'terminal_at')
if not meta[1] then
  redis.call('ZREM', KEYS[4], ARGV[1])
  return 0
end
if meta[1] ~= ARGV[2] or meta[2] ~= '1' or not (tonumber(meta[3]) < tonumber(ARGV[3])) then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('LREM', KEYS[5], 0, ARGV[1])
return 1
