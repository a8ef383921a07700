-- A library asked for with a Zipf distribution (rank r with probability proportional to 1 / r^ALPHA):
--   wrk -s zipf.lua URL -- PREFIX COUNT ALPHA
-- Each thread draws from its own seeded generator, so runs repeat.
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end

function init(args)
  prefix = args[1] or ""
  count = tonumber(args[2])
  local alpha = tonumber(args[3] or "0.8")
  cdf = {}
  local total = 0
  for rank = 1, count do
    total = total + 1 / (rank ^ alpha)
    cdf[rank] = total
  end
  for rank = 1, count do cdf[rank] = cdf[rank] / total end
  math.randomseed(1000 + (id or 1))
end

function request()
  local point = math.random()
  local low, high = 1, count
  while low < high do
    local middle = math.floor((low + high) / 2)
    if cdf[middle] < point then low = middle + 1 else high = middle end
  end
  return wrk.format("GET", string.format("%s/lib/seg%05d.ts", prefix, low - 1))
end
