-- get.lua (run by redisclaims.Script, whose prelude sets now): return the live
-- entries of a target's hash and delete the lapsed ones.
--
-- KEYS[1] the hash
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local v = all[i + 1]
  local bar = string.find(v, '|', 1, true)
  local at = bar and tonumber(string.sub(v, 1, bar - 1))
  if at and at > now then
    out[#out + 1] = string.sub(v, bar + 1)
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return out
