-- Players at the live edge: each thread alternates between the live playlist and the newest segment it lists:
--   wrk -s live.lua URL -- PREFIX
-- Relative segment URIs (the origin's playlist) are resolved against /live/; absolute paths (hlscache's rewritten
-- playlist) are taken as they are.
function init(args)
  prefix = args[1] or ""
  newest = nil
  turn = 0
end

function request()
  turn = turn + 1
  if newest == nil or turn % 2 == 1 then
    return wrk.format("GET", prefix .. "/live/index.m3u8")
  end
  return wrk.format("GET", newest)
end

function response(status, headers, body)
  if status ~= 200 or body == nil or string.sub(body, 1, 7) ~= "#EXTM3U" then return end
  local last = nil
  for line in string.gmatch(body, "[^\r\n]+") do
    if string.sub(line, 1, 1) ~= "#" then last = line end
  end
  if last == nil then return end
  if string.sub(last, 1, 1) == "/" then newest = last else newest = prefix .. "/live/" .. last end
end
