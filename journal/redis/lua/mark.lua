-- mark.lua: put on the feed the deltas of runs that append.lua left out
-- and no later record carried (the run went quiet within its feed
-- interval): one record per run, of type journal.deltas_skipped, at the
-- last left-out delta's seq and created_at, with what append.lua counted
-- (k, n, l). A run with nothing left out gets none.
--
-- KEYS[1] the feed shard; then, per run, its meta hash (all one shard)
-- ARGV[1] approximate MAXLEN of the feed shard; then the runs' ids
local out = 0
for i = 2, #KEYS do
  local f = redis.call('HMGET', KEYS[i], 'fk', 'fn', 'fl', 'fc', 'fq', 'session_id')
  if f[1] and f[6] then
    redis.call('HDEL', KEYS[i], 'fk', 'fn', 'fl', 'fc', 'fq')
    redis.call('HSET', KEYS[i], 'fa', f[4])
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*',
      'r', ARGV[i], 's', f[6], 'q', f[5], 't', 'journal.deltas_skipped', 'c', f[4],
      'k', f[1], 'n', f[2] or '0', 'l', f[3] or '')
    out = out + 1
  end
end
return out
