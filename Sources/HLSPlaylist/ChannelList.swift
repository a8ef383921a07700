/// One channel of an IPTV channel list (``Playlist/isChannelList``): the `#EXTINF:-1 …,Name` line, the
/// `#EXTVLCOPT` options before its URL, and the URL.
public struct Channel: Sendable, Hashable {
    public struct Option: Sendable, Hashable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The text after the `#EXTINF` attributes' comma (`Channel One`).
    public var name: String
    /// The `#EXTINF` attributes (`tvg-id`, `tvg-logo`, `group-title`, …), in order.
    public var attributes: [Option]
    /// `#EXTVLCOPT:name=value` lines before the URL (`http-user-agent`, `http-referrer`, …), in order.
    public var options: [Option]
    /// Kodi's request headers after the URL (`URL|User-Agent=Kodi%2F20&Referer=…`), values percent-decoded.
    public var urlHeaders: [Option] = []
    /// The reference as written (variables substituted).
    public var uri: String
    /// The absolute URL (equal to ``uri`` when read without a base URL).
    public var url: String
    /// 1-based line of the URL.
    public var line: Int

    /// The HTTP request headers the channel's options ask players to send: `http-user-agent` → `User-Agent`,
    /// `http-referrer` (and VLC's other spelling `http-referer`) → `Referer`; then Kodi's `URL|Name=value` headers.
    /// The last of each name wins.
    public var httpHeaders: [Option] {
        var headers: [Option] = []
        func set(_ name: String, _ value: String) {
            headers.removeAll { $0.name == name }
            headers.append(Option(name: name, value: value))
        }
        for option in options {
            switch option.name.lowercased() {
            case "http-user-agent": set("User-Agent", option.value)
            case "http-referrer", "http-referer": set("Referer", option.value)
            default: continue
            }
        }
        for header in urlHeaders { set(header.name, header.value) }
        return headers
    }
}

extension Playlist {
    /// The channels of an IPTV channel list: one per URI line, with the `#EXTINF` and `#EXTVLCOPT` lines before it.
    /// For any playlist this is its URI lines; it is meant for ``isChannelList``.
    public func channels(baseURL: String? = nil) throws -> [Channel] {
        let context = try ResolutionContext(playlist: self, baseURL: baseURL, imports: [:])
        var result: [Channel] = []
        var name = ""
        var attributes: [Channel.Option] = []
        var options: [Channel.Option] = []
        // Where each URI line's URL ends (before a Kodi header suffix).
        var slotEnds: [Int: Int] = [:]
        for slot in uriSlots { slotEnds[slot.lineIndex] = slot.range.upperBound }
        for (index, line) in lines.enumerated() {
            switch line.kind {
            case .tag(.inf):
                (attributes, name) = Self.channelInfo(tagValue(ofLine: index))
            case .tag(.unknown):
                let text = text(ofLine: index).trimmingLineSpace()
                guard text.hasPrefix("#EXTVLCOPT:") else { continue }
                let option = text.dropFirst("#EXTVLCOPT:".count)
                guard let equals = option.firstIndex(of: "=") else { continue }
                options.append(
                    Channel.Option(
                        name: String(option[..<equals]).trimmingLineSpace(),
                        value: String(option[option.index(after: equals)...]).trimmingLineSpace()))
            case .uri:
                defer {
                    name = ""
                    attributes = []
                    options = []
                }
                var reference = text(ofLine: index).trimmingLineSpace()
                var urlHeaders: [Channel.Option] = []
                if let pipe = slotEnds[index], pipe < line.range.upperBound,
                    bytes[pipe] == UInt8(ascii: "|")
                {
                    let suffix = String(decoding: bytes[(pipe + 1)..<line.range.upperBound], as: UTF8.self).trimmingLineSpace()
                    reference = String(decoding: bytes[line.range.lowerBound..<pipe], as: UTF8.self).trimmingLineSpace()
                    for item in suffix.split(separator: "&") {
                        guard let equals = item.firstIndex(of: "=") else { continue }
                        urlHeaders.append(
                            Channel.Option(
                                name: String(item[..<equals]), value: Self.percentDecoded(String(item[item.index(after: equals)...]))))
                    }
                }
                guard let (uri, url) = try? context.reference(reference, line: index + 1) else { continue }
                result.append(
                    Channel(
                        name: name, attributes: attributes, options: options, urlHeaders: urlHeaders, uri: uri, url: url, line: index + 1))
            default: continue
            }
        }
        return result
    }

    /// `%2F` → `/`; a malformed escape stays as written.
    static func percentDecoded(_ text: String) -> String {
        let u = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(u.count)
        func hex(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var i = 0
        while i < u.count {
            if u[i] == UInt8(ascii: "%"), i + 2 < u.count, let high = hex(u[i + 1]), let low = hex(u[i + 2]) {
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(u[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `-1 tvg-id="one" group-title="News",Channel One` → the attributes and the name: the duration, then
    /// `name="value"` (or `name=value`) items separated by spaces, then a comma outside quotes and the name.
    static func channelInfo(_ value: String) -> (attributes: [Channel.Option], name: String) {
        let u = Array(value.utf8)
        var i = 0
        // The duration.
        while i < u.count, u[i] != UInt8(ascii: " "), u[i] != UInt8(ascii: "\t"), u[i] != UInt8(ascii: ",") { i += 1 }
        var attributes: [Channel.Option] = []
        while i < u.count {
            while i < u.count, u[i] == UInt8(ascii: " ") || u[i] == UInt8(ascii: "\t") { i += 1 }
            guard i < u.count, u[i] != UInt8(ascii: ",") else { break }
            let nameStart = i
            while i < u.count, u[i] != UInt8(ascii: "="), u[i] != UInt8(ascii: " "), u[i] != UInt8(ascii: ",") { i += 1 }
            let itemName = String(decoding: u[nameStart..<i], as: UTF8.self)
            guard i < u.count, u[i] == UInt8(ascii: "=") else { continue }
            i += 1
            var itemValue = ""
            if i < u.count, u[i] == UInt8(ascii: "\"") {
                let start = i + 1
                var j = start
                while j < u.count, u[j] != UInt8(ascii: "\"") { j += 1 }
                itemValue = String(decoding: u[start..<j], as: UTF8.self)
                i = min(j + 1, u.count)
            } else {
                let start = i
                while i < u.count, u[i] != UInt8(ascii: " "), u[i] != UInt8(ascii: ",") { i += 1 }
                itemValue = String(decoding: u[start..<i], as: UTF8.self)
            }
            if !itemName.isEmpty { attributes.append(Channel.Option(name: itemName, value: itemValue)) }
        }
        let name = i < u.count ? String(decoding: u[(i + 1)...], as: UTF8.self).trimmingLineSpace() : ""
        return (attributes, name)
    }
}
