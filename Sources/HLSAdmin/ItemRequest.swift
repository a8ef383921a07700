import Foundation
import HLSCacheCore
import HLSDownloader

/// The body of `POST /api/v1/items`: the options of `hlscache fetch` as JSON (docs/api.md).
struct ItemRequest {
    var item: DownloadItem
    /// `"start": false`: create it `ready` (playlists read, nothing downloaded) until `resume`.
    var start = true
    /// `"dryRun": true`: answer the estimate (`fetch --dry-run`); nothing is recorded or stored.
    var dryRun = false
    /// The body named the item's `id` (else one was generated).
    var idGiven = false
    /// `"posterOnly": true`: create it `ready` and store its poster alone (PCD `VOCItemDownloadThumbnailOnly`).
    var posterOnly = false

    static let knownFields: Set<String> = [
        "url", "seconds", "variants", "audio", "subtitles", "iframes", "expires", "expiresAt", "id", "headers", "lock", "rate", "start",
        "through",
        "title", "tags", "poster", "meta", "maxSize", "window", "dailyLimit", "dryRun", "record", "posterOnly",
    ]

    private struct Body: Decodable {
        var url: String?
        var seconds: Int?
        var variants: String?
        var audio: String?
        var subtitles: String?
        var iframes: Bool?
        var expires: Expires?
        var expiresAt: String?
        var id: String?
        var headers: Headers?
        var lock: Bool?
        var rate: Size?
        var start: Bool?
        var through: String?
        var title: String?
        var tags: [String]?
        var poster: String?
        var maxSize: Size?
        var window: String?
        var dailyLimit: Size?
        var dryRun: Bool?
        var record: Record?
        var posterOnly: Bool?
    }

    /// `"record": {"duration": "45m" or seconds, "until": "2026-11-28T21:00:00Z"}` (`{}`: until the stream ends).
    private struct Record: Decodable {
        var duration: Expires?
        var until: String?
    }

    /// Bytes, or a size such as `"2GiB"`.
    enum Size: Decodable {
        case bytes(Double), text(String)
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                self = .text(text)
            } else {
                self = .bytes(try container.decode(Double.self))
            }
        }

        /// The byte count, or nil for a size that is not one (zero, negative, unparsable).
        var value: Int64? {
            switch self {
            case .bytes(let value): value >= 1 && value < 1e18 ? Int64(value) : nil
            case .text(let text): ByteSize(text).map(\.bytes).flatMap { $0 > 0 ? $0 : nil }
            }
        }
    }

    /// `"12h"` or a number of seconds.
    private enum Expires: Decodable {
        case text(String), seconds(Double)
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                self = .text(text)
            } else {
                self = .seconds(try container.decode(Double.self))
            }
        }
    }

    /// `{"Name": "value"}` or `["Name: value"]`.
    private enum Headers: Decodable {
        case object([String: String]), lines([String])
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let object = try? container.decode([String: String].self) {
                self = .object(object)
            } else {
                self = .lines(try container.decode([String].self))
            }
        }
    }

    /// Parses and validates; every problem is one `badRequest` naming the field.
    /// `defaultSeconds`: the precache length of an item without `seconds` (`downloads.defaultSeconds`).
    static func parse(_ body: [UInt8], now: Date = Date(), defaultSeconds: Int = 0) throws(AdminError) -> ItemRequest {
        let object: [String: Any]
        do {
            guard let parsed = try JSONSerialization.jsonObject(with: Data(body), options: []) as? [String: Any] else {
                throw AdminError.badRequest("the body must be a JSON object")
            }
            object = parsed
        } catch let error as AdminError {
            throw error
        } catch {
            throw .badRequest("the body is not valid JSON")
        }
        return try parse(object: object, data: Data(body), now: now, defaultSeconds: defaultSeconds)
    }

    /// One item's fields, already read as a JSON object (`data` is its JSON text).
    static func parse(object: [String: Any], data: Data, now: Date = Date(), defaultSeconds: Int = 0) throws(AdminError) -> ItemRequest {
        if let unknown = object.keys.sorted().first(where: { !knownFields.contains($0) }) {
            throw .badRequest("unknown field \"\(unknown)\"")
        }
        let fields: Body
        do {
            fields = try JSONDecoder().decode(Body.self, from: data)
        } catch let DecodingError.typeMismatch(type, context) {
            throw .badRequest("\"\(context.codingPath.first?.stringValue ?? "?")\": expected \(Self.describe(type))")
        } catch let DecodingError.dataCorrupted(context) {
            throw .badRequest("\"\(context.codingPath.first?.stringValue ?? "?")\": \(context.debugDescription)")
        } catch {
            throw .badRequest("the body does not match the item schema: \(error)")
        }
        guard let url = fields.url else { throw .badRequest("\"url\" (a string) is required") }
        do { _ = try OriginURL(url) } catch { throw .badRequest("\"url\": \(error)") }
        let seconds = fields.seconds ?? defaultSeconds
        guard (0...DownloadItem.maxPrecacheSeconds).contains(seconds) else {
            throw .badRequest("\"seconds\": expected 0…\(DownloadItem.maxPrecacheSeconds)")
        }
        let selection: RenditionSelection
        do {
            selection = try RenditionSelection(
                variants: fields.variants ?? "all", audio: fields.audio ?? "all", subtitles: fields.subtitles ?? "all",
                iFrames: fields.iframes ?? false, source: .json)
        } catch {
            throw .badRequest(error.message)
        }
        var expiresAt: Date?
        if let expires = fields.expires {
            let interval: TimeInterval?
            switch expires {
            case .text(let text): interval = duration(text)
            case .seconds(let value): interval = value > 0 && value.isFinite ? value : nil
            }
            guard let interval else { throw .badRequest("\"expires\": expected seconds or e.g. \"45m\", \"12h\", \"7d\", \"2w\"") }
            expiresAt = now.addingTimeInterval(interval)
        }
        if let text = fields.expiresAt {
            guard fields.expires == nil else { throw .badRequest("give \"expires\" or \"expiresAt\", not both") }
            guard let date = ItemPatchRequest.date(text) else {
                throw .badRequest("\"expiresAt\": expected an ISO 8601 date such as \"2026-12-01T00:00:00Z\"")
            }
            // Refused rather than created already expired (the scheduler would purge it on its first pass).
            guard date > now else { throw .badRequest("\"expiresAt\": \(text) is in the past") }
            expiresAt = date
        }
        let id = fields.id ?? DownloadItem.generateID()
        guard DownloadItem.isValidID(id) else { throw .badRequest("\"id\": expected 1…64 of A-Z a-z 0-9 . _ -, not . or ..") }
        var lines: [String] = []
        switch fields.headers {
        case .object(let object): lines = object.keys.sorted().map { "\($0): \(object[$0]!)" }
        case .lines(let list): lines = list
        case nil: break
        }
        var headers: [HeaderField] = []
        for line in lines {
            guard let field = HeaderField(parsing: line) else { throw .badRequest("\"headers\": \(line.prefix(80)) is not 'Name: value'") }
            headers.append(field)
        }
        var item = DownloadItem(
            id: id, url: url, selection: selection, precacheSeconds: seconds, expiresAt: expiresAt, locked: fields.lock ?? false,
            headers: headers, now: now)
        if let through = fields.through {
            // A fleet's balancer (`hlscache fetch --through`): every resource of the item is requested through it.
            guard let server = try? OriginURL(through), server.path == "/", server.query == nil else {
                throw .badRequest("\"through\": expected the balancer's base URL, http://HOST:PORT")
            }
            item.through = "\(server.scheme)://\(server.authority)"
        }
        do throws(ItemMetadata.Problem) {
            if let title = fields.title { item.title = try ItemMetadata.title(title) }
            if let tags = fields.tags { item.tags = try ItemMetadata.tags(tags) }
            if let poster = fields.poster { item.posterURL = try ItemMetadata.poster(poster) }
            if let meta = object["meta"], !(meta is NSNull) { item.metadata = try ItemMetadata.meta(meta) }
        } catch {
            throw .badRequest(error.message)
        }
        if let size = fields.maxSize {
            guard let bytes = size.value else { throw .badRequest("\"maxSize\": expected bytes or a size such as \"2GiB\"") }
            item.maxBytes = bytes
        }
        if let rate = fields.rate {
            // The item's own bandwidth cap, as PATCH and `hlscache set --rate` set it (within the server's).
            guard let bytes = rate.value, bytes < 1_000_000_000_000_000 else {
                throw .badRequest("\"rate\": expected bytes per second, e.g. \"2MiB\"")
            }
            item.rateLimit = bytes
        }
        if let size = fields.dailyLimit {
            guard let bytes = size.value else { throw .badRequest("\"dailyLimit\": expected bytes or a size such as \"500MiB\"") }
            item.dailyBytes = bytes
        }
        if let text = fields.window {
            guard let window = DownloadWindow(parsing: text) else {
                throw .badRequest("\"window\": expected HH:MM-HH:MM, e.g. \"22:00-06:00\"")
            }
            item.downloadWindow = window
        }
        if let record = fields.record {
            // A live recording (`fetch --record`): docs/fetch.md#live.
            var spec = RecordSpec()
            if let duration = record.duration {
                switch duration {
                case .text(let text): spec.duration = Self.duration(text)
                case .seconds(let value): spec.duration = value > 0 && value.isFinite ? value : nil
                }
                guard spec.duration != nil else {
                    throw .badRequest("\"record.duration\": expected seconds or e.g. \"90s\", \"45m\", \"2h\"")
                }
            }
            if let until = record.until {
                guard let date = ISO8601DateFormatter().date(from: until) else {
                    throw .badRequest("\"record.until\": expected an ISO 8601 time, e.g. \"2026-11-28T21:00:00Z\"")
                }
                spec.until = date
            }
            item.record = spec
        }
        let posterOnly = fields.posterOnly ?? false
        if posterOnly {
            guard item.posterURL != nil else { throw .badRequest("\"posterOnly\": needs \"poster\"") }
            if fields.start == true || fields.dryRun == true || fields.record != nil {
                throw .badRequest("\"posterOnly\" stores the poster alone: not with \"start\": true, \"dryRun\" or \"record\"")
            }
        }
        return ItemRequest(
            item: item, start: !posterOnly && (fields.start ?? true), dryRun: fields.dryRun ?? false, idGiven: fields.id != nil,
            posterOnly: posterOnly)
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is Int.Type: "an integer"
        case is Bool.Type: "true or false"
        case is String.Type: "a string"
        case is Double.Type: "a number or a duration such as \"12h\""
        default: "a value of another type"
        }
    }

    /// `7d`, `12h`, `30m`, `45s`, `2w`, or a bare number of seconds.
    static func duration(_ text: String) -> TimeInterval? {
        guard let last = text.last else { return nil }
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800]
        if let unit = units[last], let number = Double(text.dropLast()), number > 0, number.isFinite { return number * unit }
        if let number = Double(text), number > 0, number.isFinite { return number }
        return nil
    }
}
