import Foundation
import HLSCacheCore

/// The rules for an item's metadata (title, tags, poster, the caller's JSON), shared by the CLI and the API so both
/// refuse the same things with the same words.
package enum ItemMetadata {
    package static let maxTitleLength = 200
    package static let maxTags = 32
    package static let maxTagLength = 64
    /// The caller's JSON, as compact text.
    package static let maxMetaBytes = 16 * 1024

    /// What is wrong with a metadata value, in words for the user.
    package struct Problem: Error, Sendable, CustomStringConvertible {
        package let message: String
        package var description: String { message }

        package init(message: String) {
            self.message = message
        }
    }

    /// A title: 1…200 characters, no control characters; surrounding spaces dropped.
    package static func title(_ text: String) throws(Problem) -> String {
        let title = text.trimmingCharacters(in: .whitespaces)
        guard !title.isEmpty, title.count <= maxTitleLength,
            !title.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw Problem(message: "a title is 1…\(maxTitleLength) characters without control characters")
        }
        return title
    }

    /// Tags: each 1…64 characters, no comma or control characters; duplicates dropped, order kept; at most 32.
    package static func tags(_ list: [String]) throws(Problem) -> [String] {
        var result: [String] = []
        for raw in list {
            let tag = raw.trimmingCharacters(in: .whitespaces)
            guard !tag.isEmpty, tag.count <= maxTagLength, !tag.contains(","),
                !tag.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                throw Problem(
                    message: "tag \"\(raw.prefix(80))\": a tag is 1…\(maxTagLength) characters without commas or control characters")
            }
            if !result.contains(tag) { result.append(tag) }
        }
        guard result.count <= maxTags else { throw Problem(message: "at most \(maxTags) tags") }
        return result
    }

    /// A poster URL: an absolute `http(s)` URL the proxy can serve.
    package static func poster(_ text: String) throws(Problem) -> String {
        do {
            return try OriginURL(text).string
        } catch {
            throw Problem(message: "poster \(text.prefix(120)): not an http(s) URL (\(error))")
        }
    }

    /// The caller's JSON object as compact text with sorted keys, at most 16 KiB.
    package static func meta(_ object: Any) throws(Problem) -> String {
        guard object is [String: Any], JSONSerialization.isValidJSONObject(object),
            let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else {
            throw Problem(message: "meta must be a JSON object")
        }
        guard data.count <= maxMetaBytes else { throw Problem(message: "meta is \(data.count) bytes as JSON; at most \(maxMetaBytes)") }
        return String(decoding: data, as: UTF8.self)
    }

    /// The caller's JSON object given as text (`fetch --meta '{"k": 1}'`).
    package static func meta(text: String) throws(Problem) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) else {
            throw Problem(message: "meta is not valid JSON")
        }
        return try meta(object)
    }

    /// The proxy path of the item's poster (where a page shows it from), if it has one.
    package static func posterPath(of item: DownloadItem) -> String? {
        item.posterURL.flatMap { try? OriginURL($0) }?.proxyPath
    }
}
