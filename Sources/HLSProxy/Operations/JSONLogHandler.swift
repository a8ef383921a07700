#if canImport(Glibc)
    import Glibc
#endif
import HLSCacheCore
import Logging

/// A swift-log handler that writes one JSON object per line (`--log-format json`):
/// `{"timestamp":"2026-11-22T05:01:02.345Z","level":"info","label":"hlscache.access","message":"…","metadata":{…}}`.
/// Timestamps are ISO 8601 in UTC with milliseconds; every string is escaped, so a line is always one valid
/// JSON object whatever the message holds.
package struct JSONLogHandler: LogHandler {
    /// Where lines go.
    package enum Stream: Sendable {
        case standardError, standardOutput
        /// Every line is handed to `sink` (tests).
        case custom(@Sendable (String) -> Void)
    }

    package var logLevel: Logger.Level = .info
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let stream: Stream

    package init(label: String, stream: Stream = .standardError, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.stream = stream
        self.metadataProvider = metadataProvider
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        write(level: event.level, message: event.message, metadata: event.metadata, source: event.source)
    }

    private func write(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, source: String) {
        var merged = self.metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit { merged.merge(explicit) { _, new in new } }
        let text = Self.line(timestamp: Self.timestamp(), level: level, label: label, message: message.description, metadata: merged)
        switch stream {
        case .custom(let sink): sink(text)
        case .standardError: StandardStreams.write(text, to: 2)
        case .standardOutput: StandardStreams.write(text, to: 1)
        }
    }

    /// The JSON line, newline included.
    static func line(timestamp: String, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata) -> String {
        var out = "{\"timestamp\":\"\(timestamp)\",\"level\":\"\(level.rawValue)\",\"label\":"
        JSONText.appendString(label, to: &out)
        out += ",\"message\":"
        JSONText.appendString(message, to: &out)
        if !metadata.isEmpty {
            out += ",\"metadata\":"
            appendObject(metadata, to: &out)
        }
        out += "}\n"
        return out
    }

    private static func appendObject(_ metadata: Logger.Metadata, to out: inout String) {
        out += "{"
        var first = true
        for key in metadata.keys.sorted() {
            if !first { out += "," }
            first = false
            JSONText.appendString(key, to: &out)
            out += ":"
            appendValue(metadata[key]!, to: &out)
        }
        out += "}"
    }

    private static func appendValue(_ value: Logger.Metadata.Value, to out: inout String) {
        switch value {
        case .string(let string): JSONText.appendString(string, to: &out)
        case .stringConvertible(let convertible): JSONText.appendString(convertible.description, to: &out)
        case .dictionary(let dictionary): appendObject(dictionary, to: &out)
        case .array(let array):
            out += "["
            for (index, element) in array.enumerated() {
                if index > 0 { out += "," }
                appendValue(element, to: &out)
            }
            out += "]"
        }
    }

    /// Now as `2026-11-22T05:01:02.345Z`.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var parts = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let millis = Int32(now.tv_nsec / 1_000_000)
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(millis, 3))Z"
    }
}
