import Foundation
import HLSCacheCore
import HLSDownloader

/// The body of `PATCH /api/v1/items/{id}` (docs/api.md): `expires` (relative: seconds, `"45m"`, `"7d"`; `"never"` or
/// `null`: no expiry), `expiresAt` (an absolute ISO 8601 date), `lock` (true or false), `rate` (the item's own
/// bandwidth cap: bytes per second, `"2MiB"`; `"none"` or `null`: none). At least one; not both expiries.
enum ItemPatchRequest {
    static let knownFields: Set<String> = [
        "expires", "expiresAt", "lock", "rate", "title", "tags", "poster", "meta", "maxSize", "window", "dailyLimit",
    ]

    static func parse(_ body: [UInt8], now: Date = Date()) throws(AdminError) -> ItemChanges {
        let object: [String: Any]
        do {
            guard let parsed = try JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed]) as? [String: Any] else {
                throw AdminError.badRequest("the body must be a JSON object")
            }
            object = parsed
        } catch let error as AdminError {
            throw error
        } catch {
            throw .badRequest("the body is not JSON: \(error.localizedDescription)")
        }
        if let unknown = object.keys.sorted().first(where: { !knownFields.contains($0) }) {
            throw .badRequest("unknown field \"\(unknown)\" (expected \(knownFields.sorted().joined(separator: ", ")))")
        }
        let fields: Body
        do {
            fields = try JSONDecoder().decode(Body.self, from: Data(body))
        } catch {
            throw .badRequest(
                "\"expires\" is seconds, e.g. \"45m\", \"7d\", \"never\" or null; \"expiresAt\" an ISO 8601 date; \"lock\" true or false")
        }
        var changes = ItemChanges()
        if fields.expires != nil && fields.expiresAt != nil { throw .badRequest("give \"expires\" or \"expiresAt\", not both") }
        switch fields.expires {
        case nil: break
        case .never: changes.expiresAt = .some(nil)
        case .seconds(let value):
            guard value > 0 && value.isFinite else { throw .badRequest("\"expires\": expected a positive number of seconds") }
            changes.expiresAt = .some(now.addingTimeInterval(value))
        case .text(let text):
            guard let interval = ItemRequest.duration(text) else {
                throw .badRequest("\"expires\": expected seconds, e.g. \"45m\", \"7d\", or \"never\"")
            }
            changes.expiresAt = .some(now.addingTimeInterval(interval))
        }
        if let text = fields.expiresAt {
            guard let date = Self.date(text) else {
                throw .badRequest("\"expiresAt\": expected an ISO 8601 date such as \"2026-12-01T00:00:00Z\"")
            }
            changes.expiresAt = .some(date)
        }
        changes.locked = fields.lock
        switch fields.rate {
        case nil: break
        case .never: changes.rateLimit = .some(nil)
        case .seconds(let bytes):
            guard bytes >= 1 && bytes < 1e15 else { throw .badRequest("\"rate\": expected bytes per second, e.g. \"2MiB\", or \"none\"") }
            changes.rateLimit = .some(Int64(bytes))
        case .text(let text):
            guard let bytes = ByteSize(text)?.bytes, bytes > 0 else {
                throw .badRequest("\"rate\": expected bytes per second, e.g. \"2MiB\", or \"none\"")
            }
            changes.rateLimit = .some(bytes)
        }
        try metadata(object, into: &changes)
        guard !changes.isEmpty else { throw .badRequest("nothing to change: give one of \(knownFields.sorted().joined(separator: ", "))") }
        return changes
    }

    /// Title, tags, poster, meta, maxSize, window, dailyLimit: each `null` removes it (tags: `[]`).
    private static func metadata(_ object: [String: Any], into changes: inout ItemChanges) throws(AdminError) {
        do throws(ItemMetadata.Problem) {
            if let value = object["title"] {
                guard value is NSNull || value is String else {
                    throw ItemMetadata.Problem(message: "\"title\": expected a string or null")
                }
                changes.title = .some(try (value as? String).map(ItemMetadata.title))
            }
            if let value = object["tags"] {
                guard let list = value as? [String] ?? (value is NSNull ? [] : nil) else {
                    throw ItemMetadata.Problem(message: "\"tags\": expected a list of strings")
                }
                changes.tags = try ItemMetadata.tags(list)
            }
            if let value = object["poster"] {
                guard value is NSNull || value is String else { throw ItemMetadata.Problem(message: "\"poster\": expected a URL or null") }
                changes.posterURL = .some(try (value as? String).map(ItemMetadata.poster))
            }
            if let value = object["meta"] {
                changes.metadata = .some(value is NSNull ? nil : try ItemMetadata.meta(value))
            }
        } catch {
            throw .badRequest(error.message)
        }
        if let value = object["maxSize"] {
            if value is NSNull || (value as? String)?.lowercased() == "none" {
                changes.maxBytes = .some(nil)
            } else {
                let size: ItemRequest.Size? = (value as? String).map { .text($0) } ?? (value as? NSNumber).map { .bytes($0.doubleValue) }
                guard let bytes = size?.value else { throw .badRequest("\"maxSize\": expected bytes, a size such as \"2GiB\", or null") }
                changes.maxBytes = .some(bytes)
            }
        }
        if let value = object["dailyLimit"] {
            if value is NSNull || (value as? String)?.lowercased() == "none" {
                changes.dailyBytes = .some(nil)
            } else {
                let size: ItemRequest.Size? = (value as? String).map { .text($0) } ?? (value as? NSNumber).map { .bytes($0.doubleValue) }
                guard let bytes = size?.value else {
                    throw .badRequest("\"dailyLimit\": expected bytes, a size such as \"500MiB\", or null")
                }
                changes.dailyBytes = .some(bytes)
            }
        }
        if let value = object["window"] {
            if value is NSNull || (value as? String)?.lowercased() == "none" {
                changes.downloadWindow = .some(nil)
            } else {
                guard let window = (value as? String).flatMap(DownloadWindow.init(parsing:)) else {
                    throw .badRequest("\"window\": expected HH:MM-HH:MM, e.g. \"22:00-06:00\", or null")
                }
                changes.downloadWindow = .some(window)
            }
        }
    }

    private enum Expires: Equatable {
        case never, text(String), seconds(Double)
    }

    private struct Body: Decodable {
        var expires: Expires?
        var expiresAt: String?
        var lock: Bool?
        var rate: Expires?

        enum CodingKeys: String, CodingKey { case expires, expiresAt, lock, rate }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if container.contains(.expires) {
                if try container.decodeNil(forKey: .expires) {
                    expires = .never
                } else if let text = try? container.decode(String.self, forKey: .expires) {
                    expires = text.lowercased() == "never" ? .never : .text(text)
                } else {
                    expires = .seconds(try container.decode(Double.self, forKey: .expires))
                }
            }
            expiresAt = try container.decodeIfPresent(String.self, forKey: .expiresAt)
            lock = try container.decodeIfPresent(Bool.self, forKey: .lock)
            if container.contains(.rate) {
                if try container.decodeNil(forKey: .rate) {
                    rate = .never
                } else if let text = try? container.decode(String.self, forKey: .rate) {
                    rate = text.lowercased() == "none" ? .never : .text(text)
                } else {
                    rate = .seconds(try container.decode(Double.self, forKey: .rate))
                }
            }
        }
    }

    /// An ISO 8601 date with or without fractional seconds.
    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
