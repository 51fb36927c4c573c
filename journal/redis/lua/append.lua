-- append.lua: journal one event of a run, atomically.
--
-- KEYS[1] run meta hash        KEYS[2] run event stream
-- KEYS[3] run idempotency hash KEYS[4] session hash
-- KEYS[5] status feed shard    KEYS[6] active-runs set
-- KEYS[7] ended-runs zset (run id -> terminal_at)
--
-- ARGV[1] run id     ARGV[2] session id   ARGV[3] event type
-- ARGV[4] created_at ARGV[5] terminal ("1" or "0")
-- ARGV[6] payload (already validated, redacted and bounded by the caller)
-- ARGV[7] idempotency key, "" for none (stored per run, kept until Trim)
-- ARGV[8] attempt token of a keyless append, "" when keyed. Only the newest
--         token (and its seq) is kept: it recognises a transport-level retry
--         of the same call unless another keyless append came in between.
-- ARGV[9] feed payload: "" to copy the payload, "{}" for delta events
-- ARGV[10] approximate MAXLEN of the feed shard
--
-- Replies:
--   {"ok", seq}
--   {"dup", seq, fields}       the key (or token) was used: the stored event
--   {"terminal", seq, fields}  the run has ended: its terminal event
--   {"notfound"}               no such run
--   {"session", session_id}    the run belongs to another session
-- fields is the flat field/value list of the stream entry.

local meta = redis.call('HMGET', KEYS[1], 'session_id', 'last_seq', 'terminal', 'tok', 'tok_seq')
local sid, last, ended, tok = meta[1], tonumber(meta[2]) or 0, meta[3], meta[4]
if not sid then
  return {'notfound'}
end
if sid ~= ARGV[2] then
  return {'session', sid}
end

local function entry(seq)
  local id = string.format('%d-0', seq)
  local r = redis.call('XRANGE', KEYS[2], id, id)
  if r[1] then
    return r[1][2]
  end
  return {}
end

-- A retry comes before the terminal check: the retry of a terminal append
-- succeeds with the event it stored.
if ARGV[7] ~= '' then
  local prev = redis.call('HGET', KEYS[3], ARGV[7])
  if prev then
    return {'dup', tonumber(prev), entry(tonumber(prev))}
  end
elseif tok and tok == ARGV[8] then
  local prev = tonumber(meta[5])
  return {'dup', prev, entry(prev)}
end
if ended == '1' then
  return {'terminal', last, entry(last)}
end

local seq = last + 1
-- XADD first: if it fails nothing else has changed (a script is not rolled
-- back), so seq stays contiguous.
redis.call('XADD', KEYS[2], string.format('%d-0', seq),
  's', ARGV[2], 't', ARGV[3], 'c', ARGV[4], 'x', ARGV[5], 'p', ARGV[6])
if ARGV[7] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[7], seq)
  redis.call('HSET', KEYS[1], 'last_seq', seq)
else
  redis.call('HSET', KEYS[1], 'last_seq', seq, 'tok', ARGV[8], 'tok_seq', seq)
end
if ARGV[5] == '1' then
  redis.call('HSET', KEYS[1], 'terminal', '1', 'terminal_type', ARGV[3], 'terminal_at', ARGV[4])
  redis.call('SREM', KEYS[6], ARGV[1])
  redis.call('ZADD', KEYS[7], ARGV[4], ARGV[1])
  if redis.call('HGET', KEYS[4], 'active_run') == ARGV[1] then
    redis.call('HDEL', KEYS[4], 'active_run')
  end
end

local fp = ARGV[9]
if fp == '' then
  fp = ARGV[6]
end
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[10], '*',
  'r', ARGV[1], 's', ARGV[2], 'q', seq, 't', ARGV[3], 'c', ARGV[4], 'x', ARGV[5], 'p', fp)
return {'ok', seq}
