/// One channel of an IPTV channel list (``Playlist/isChannelList``): the `#EXTINF:-1 …,Name` line, the
/// `#EXTVLCOPT`, `#KODIPROP` and `#EXTHTTP` lines before its URL, and the URL.
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
    /// `#KODIPROP:name=value` lines before the URL (`inputstream.adaptive.stream_headers`, …), in order.
    public var properties: [Option] = []
    /// The headers of `#EXTHTTP:{"User-Agent":"…","Referer":"…"}` lines before the URL (TiviMate, OTT Navigator),
    /// in order.
    public var extHTTPHeaders: [Option] = []
    /// Kodi's request headers after the URL (`URL|User-Agent=Kodi%2F20&Referer=…`), values percent-decoded.
    public var urlHeaders: [Option] = []
    /// The reference as written (variables substituted).
    public var uri: String
    /// The absolute URL (equal to ``uri`` when read without a base URL).
    public var url: String
    /// 1-based line of the URL.
    public var line: Int

    /// The HTTP request headers the channel's options ask players to send: `http-user-agent` → `User-Agent`,
    /// `http-referrer` (and VLC's other spelling `http-referer`) → `Referer`; then the `Name=value&…` lists of
    /// `#KODIPROP:inputstream.adaptive.manifest_headers` and `…stream_headers` (values percent-decoded); then
    /// `#EXTHTTP`'s headers; then Kodi's `URL|Name=value` headers. The last of each name wins.
    public var httpHeaders: [Option] {
        var headers: [Option] = []
        func set(_ name: String, _ value: String) {
            // A header that cannot be sent as it is (a control character from an `#EXTHTTP` escape, a name that is
            // no HTTP token) is left out rather than mangled.
            guard !name.isEmpty, name.utf8.allSatisfy(Channel.isTokenByte),
                value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) })
            else { return }
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
        for property in properties {
            switch property.name.lowercased() {
            case "inputstream.adaptive.manifest_headers", "inputstream.adaptive.stream_headers":
                for header in Playlist.headerList(property.value) { set(header.name, header.value) }
            default: continue
            }
        }
        for header in extHTTPHeaders { set(header.name, header.value) }
        for header in urlHeaders { set(header.name, header.value) }
        return headers
    }
}

extension Channel {
    /// RFC 9110 `tchar`.
    static func isTokenByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default: return false
        }
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
        var properties: [Channel.Option] = []
        var extHTTPHeaders: [Channel.Option] = []
        // Where each URI line's URL ends (before a Kodi header suffix).
        var slotEnds: [Int: Int] = [:]
        for slot in uriSlots { slotEnds[slot.lineIndex] = slot.range.upperBound }
        for (index, line) in lines.enumerated() {
            switch line.kind {
            case .tag(.inf):
                (attributes, name) = Self.channelInfo(tagValue(ofLine: index))
            case .tag(.unknown), .comment:
                // `#KODIPROP:` is no `#EXT` tag: a comment to the reader.
                let text = text(ofLine: index).trimmingLineSpace()
                if text.hasPrefix("#EXTHTTP:") {
                    extHTTPHeaders += Self.jsonStringObject(String(text.dropFirst("#EXTHTTP:".count))) ?? []
                    continue
                }
                let prefix = text.hasPrefix("#EXTVLCOPT:") ? "#EXTVLCOPT:" : text.hasPrefix("#KODIPROP:") ? "#KODIPROP:" : nil
                guard let prefix else { continue }
                let option = text.dropFirst(prefix.count)
                guard let equals = option.firstIndex(of: "=") else { continue }
                let item = Channel.Option(
                    name: String(option[..<equals]).trimmingLineSpace(),
                    value: String(option[option.index(after: equals)...]).trimmingLineSpace())
                if prefix == "#EXTVLCOPT:" { options.append(item) } else { properties.append(item) }
            case .uri:
                defer {
                    name = ""
                    attributes = []
                    options = []
                    properties = []
                    extHTTPHeaders = []
                }
                var reference = text(ofLine: index).trimmingLineSpace()
                var urlHeaders: [Channel.Option] = []
                if let pipe = slotEnds[index], pipe < line.range.upperBound,
                    bytes[pipe] == UInt8(ascii: "|")
                {
                    let suffix = String(decoding: bytes[(pipe + 1)..<line.range.upperBound], as: UTF8.self).trimmingLineSpace()
                    reference = URIResolver.text(of: bytes[line.range.lowerBound..<pipe]).trimmingLineSpace()
                    urlHeaders = Self.headerList(suffix)
                }
                guard let (uri, url) = try? context.reference(reference, line: index + 1) else { continue }
                result.append(
                    Channel(
                        name: name, attributes: attributes, options: options, properties: properties, extHTTPHeaders: extHTTPHeaders,
                        urlHeaders: urlHeaders, uri: uri, url: url, line: index + 1))
            default: continue
            }
        }
        return result
    }

    /// `User-Agent=Kodi%2F20&Referer=…` (Kodi's URL suffix, `inputstream.adaptive.stream_headers`) → the headers,
    /// values percent-decoded; an item without `=` is skipped.
    public static func headerList(_ text: String) -> [Channel.Option] {
        var headers: [Channel.Option] = []
        for item in text.split(separator: "&") {
            guard let equals = item.firstIndex(of: "="), equals > item.startIndex else { continue }
            headers.append(Channel.Option(name: String(item[..<equals]), value: percentDecoded(String(item[item.index(after: equals)...]))))
        }
        return headers
    }

    /// `{"User-Agent":"VLC/3","Referer":"http://…"}` → its members, in order; nil unless it is one JSON object whose
    /// values are strings (`#EXTHTTP`).
    static func jsonStringObject(_ text: String) -> [Channel.Option]? {
        let u = Array(text.utf8)
        var i = 0
        func skipSpace() { while i < u.count, u[i] == 0x20 || u[i] == 0x09 || u[i] == 0x0A || u[i] == 0x0D { i += 1 } }
        func string() -> String? {
            guard i < u.count, u[i] == UInt8(ascii: "\"") else { return nil }
            i += 1
            var scalars = String.UnicodeScalarView()
            var run: [UInt8] = []
            func flush() {
                scalars.append(contentsOf: String(decoding: run, as: UTF8.self).unicodeScalars)
                run.removeAll()
            }
            while i < u.count {
                let c = u[i]
                if c == UInt8(ascii: "\"") {
                    i += 1
                    flush()
                    return String(scalars)
                }
                guard c == UInt8(ascii: "\\") else {
                    run.append(c)
                    i += 1
                    continue
                }
                guard i + 1 < u.count else { return nil }
                let escaped = u[i + 1]
                i += 2
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): run.append(escaped)
                case UInt8(ascii: "n"): run.append(0x0A)
                case UInt8(ascii: "t"): run.append(0x09)
                case UInt8(ascii: "r"): run.append(0x0D)
                case UInt8(ascii: "b"): run.append(0x08)
                case UInt8(ascii: "f"): run.append(0x0C)
                case UInt8(ascii: "u"):
                    guard i + 4 <= u.count, let code = UInt32(String(decoding: u[i..<(i + 4)], as: UTF8.self), radix: 16) else {
                        return nil
                    }
                    i += 4
                    flush()
                    scalars.append(Unicode.Scalar(code) ?? "\u{FFFD}")
                default: return nil
                }
            }
            return nil
        }
        skipSpace()
        guard i < u.count, u[i] == UInt8(ascii: "{") else { return nil }
        i += 1
        var members: [Channel.Option] = []
        skipSpace()
        if i < u.count, u[i] == UInt8(ascii: "}") { return [] }
        while true {
            skipSpace()
            guard let name = string() else { return nil }
            skipSpace()
            guard i < u.count, u[i] == UInt8(ascii: ":") else { return nil }
            i += 1
            skipSpace()
            guard let value = string() else { return nil }
            members.append(Channel.Option(name: name, value: value))
            skipSpace()
            guard i < u.count else { return nil }
            if u[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            guard u[i] == UInt8(ascii: "}") else { return nil }
            return members
        }
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
