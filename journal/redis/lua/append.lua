-- append.lua: journal a batch of events (one or more, of any runs), each
-- append atomic and the whole batch one step.
--
-- KEYS[1] this batch's reply cache (a fresh random key per batch)
-- then per append i = 0, 1, …, at KEYS[2+8i] … KEYS[9+8i]:
--   run meta hash, run event stream, run idempotency hash, session hash,
--   status feed shard, active-runs set, ended-runs zset (run id ->
--   terminal_at), outbox stream, all of the session's shard
--
-- On a Redis Cluster every key of one batch has the same hash tag (the
-- caller groups appends by shard); on a single Redis a batch may mix shards.
--
-- ARGV[1] approximate MAXLEN of the feed shards
-- ARGV[2] seconds the reply cache is kept
-- ARGV[3] the feed interval in seconds ("0": every delta goes to the feed)
-- then per append i, at ARGV[4+8i] … ARGV[11+8i]:
--   run id, session id, event type, created_at, terminal ("1" or "0"),
--   payload (validated, redacted and bounded by the caller),
--   idempotency key ("" for none), delta ("1": the feed record goes
--   without payload)
--
-- The reply has one element per append:
--   {"ok", seq}
--   {"dup", seq, fields}       the key was used: the event stored then
--   {"terminal", seq, fields}  the run has ended: its terminal event
--   {"notfound"}               no such run
--   {"session", session_id}    the run belongs to another session
--   {"err", message}           a Redis error; nothing of this append stored
-- fields is the flat field/value list of the run stream entry.
--
-- A transport-level retry of the same batch (go-redis resends a command
-- whose reply was lost) finds the reply cache and answers from it instead
-- of journaling again.

local nkeys, nargs = 8, 8

-- The outbox of a shard exists only once a sender turned it on
-- (Store.EnableOutbox); it keeps at most about this many entries.
local outboxmax = '100000'

local function entry(stream, seq)
  local id = string.format('%d-0', seq)
  local r = redis.call('XRANGE', stream, id, id)
  if r[1] then
    return r[1][2]
  end
  return {}
end

local cached = redis.call('GET', KEYS[1])
if cached then
  -- "ok 5,dup 3,terminal 7,notfound,session s-1,err message"
  local out, i = {}, 0
  for item in string.gmatch(cached, '([^,]*),') do
    local status, rest = string.match(item, '^(%S+) ?(.*)$')
    local ev = KEYS[2 + nkeys * i + 1]
    if status == 'ok' then
      out[#out + 1] = {'ok', tonumber(rest)}
    elseif status == 'dup' or status == 'terminal' then
      out[#out + 1] = {status, tonumber(rest), entry(ev, tonumber(rest))}
    elseif status == 'notfound' then
      out[#out + 1] = {'notfound'}
    else
      out[#out + 1] = {status, rest}
    end
    i = i + 1
  end
  return out
end

local maxlen = ARGV[1]
local interval = tonumber(ARGV[3]) or 0

-- feed puts the feed record of an appended event, or, with a feed
-- interval, leaves a delta out when its run's last feed record is younger
-- than the interval (by created_at), counting it in the run's hash: fk
-- deltas left out, fn of them tokens, fl the last that sets the progress,
-- fc its created_at, fq its seq. The next record of the run carries them
-- (k, n, l, lc), and so does mark.lua's record when the run goes quiet.
local function feed(k, run, sid, seq, typ, created, terminal, payload, delta)
  if interval <= 0 then
    redis.call('XADD', KEYS[k + 4], 'MAXLEN', '~', maxlen, '*',
      'r', run, 's', sid, 'q', seq, 't', typ, 'c', created, 'x', terminal, 'p', payload)
    return
  end
  local f = redis.call('HMGET', KEYS[k], 'fa', 'fk', 'fn', 'fl', 'fc')
  if delta == '1' and tonumber(created) - (tonumber(f[1]) or 0) < interval then
    redis.call('HINCRBY', KEYS[k], 'fk', 1)
    if typ == 'token.delta' then
      redis.call('HINCRBY', KEYS[k], 'fn', 1)
    end
    if typ ~= 'tool.updated' then
      redis.call('HSET', KEYS[k], 'fl', typ)
    end
    redis.call('HSET', KEYS[k], 'fc', created, 'fq', seq)
    return
  end
  redis.call('HSET', KEYS[k], 'fa', created)
  if f[2] then
    redis.call('HDEL', KEYS[k], 'fk', 'fn', 'fl', 'fc', 'fq')
    redis.call('XADD', KEYS[k + 4], 'MAXLEN', '~', maxlen, '*',
      'r', run, 's', sid, 'q', seq, 't', typ, 'c', created, 'x', terminal, 'p', payload,
      'k', f[2], 'n', f[3] or '0', 'l', f[4] or '', 'lc', f[5])
    return
  end
  redis.call('XADD', KEYS[k + 4], 'MAXLEN', '~', maxlen, '*',
    'r', run, 's', sid, 'q', seq, 't', typ, 'c', created, 'x', terminal, 'p', payload)
end

local function append(k, a)
  local meta = redis.call('HMGET', KEYS[k], 'session_id', 'last_seq', 'terminal')
  local sid, last, ended = meta[1], tonumber(meta[2]) or 0, meta[3]
  local run, typ, created, terminal, payload, key, delta =
    ARGV[a], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7]
  if not sid then
    return {'notfound'}
  end
  if sid ~= ARGV[a + 1] then
    return {'session', sid}
  end
  -- A retry comes before the terminal check: the retry of a terminal append
  -- succeeds with the event it stored.
  if key ~= '' then
    local prev = redis.call('HGET', KEYS[k + 2], key)
    if prev then
      return {'dup', tonumber(prev), entry(KEYS[k + 1], tonumber(prev))}
    end
  end
  if ended == '1' then
    return {'terminal', last, entry(KEYS[k + 1], last)}
  end

  local seq = last + 1
  -- XADD first: if it fails nothing else has changed (a script is not
  -- rolled back), so seq stays contiguous.
  redis.call('XADD', KEYS[k + 1], string.format('%d-0', seq),
    's', sid, 't', typ, 'c', created, 'x', terminal, 'p', payload)
  redis.call('HSET', KEYS[k], 'last_seq', seq)
  if key ~= '' then
    redis.call('HSET', KEYS[k + 2], key, seq)
  end
  if terminal == '1' then
    redis.call('HSET', KEYS[k], 'terminal', '1', 'terminal_type', typ, 'terminal_at', created)
    redis.call('SREM', KEYS[k + 5], run)
    redis.call('ZADD', KEYS[k + 6], created, run)
    if redis.call('HGET', KEYS[k + 3], 'active_run') == run then
      redis.call('HDEL', KEYS[k + 3], 'active_run')
    end
  end
  -- A notable event (journal.Notable) goes to the shard's outbox, when it
  -- is on, in this same step.
  if (terminal == '1' or typ == 'approval.requested' or typ == 'clarify.requested'
      or typ == 'goal.updated') and redis.call('EXISTS', KEYS[k + 7]) == 1 then
    redis.call('XADD', KEYS[k + 7], 'MAXLEN', '~', outboxmax, '*',
      'r', run, 's', sid, 'q', seq, 't', typ)
  end
  -- The feed carries status, not content: delta events go without payload.
  if delta == '1' then
    payload = '{}'
  end
  feed(k, run, sid, seq, typ, created, terminal, payload, delta)
  return {'ok', seq}
end

local out, cache = {}, {}
local n = (#KEYS - 1) / nkeys
for i = 0, n - 1 do
  local ok, r = pcall(append, 2 + nkeys * i, 4 + nargs * i)
  if not ok then
    if type(r) == 'table' then
      r = r.err or r.message or 'error'
    end
    r = {'err', (string.gsub(tostring(r), ',', ';'))}
  end
  out[#out + 1] = r
  cache[#cache + 1] = r[1] .. (r[2] and (' ' .. r[2]) or '') .. ','
end
redis.call('SET', KEYS[1], table.concat(cache), 'EX', ARGV[2])
return out
