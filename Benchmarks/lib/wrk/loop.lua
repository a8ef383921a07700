-- N distinct segments requested in turn (a VOD library walked through, or viewers of different streams):
--   wrk -s loop.lua URL -- PREFIX COUNT
-- PREFIX is the path in front of the origin path (hlscache's /http/host:port, nothing for the others); the threads
-- start half the set apart.
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end

function init(args)
  prefix = args[1] or ""
  count = tonumber(args[2])
  index = ((id or 1) - 1) * math.floor(count / 2)
end

function request()
  local path = string.format("%s/lib/seg%05d.ts", prefix, index % count)
  index = index + 1
  return wrk.format("GET", path)
end
