import Foundation
import HLSKeys

/// How an item's request headers (`hlscache fetch --header`: cookies, bearer tokens) are kept in `items.sqlite`:
/// sealed under the master key (`sealed:` + base64 of AES-256-GCM, bound to the item id) when the store has one,
/// plain JSON otherwise. Plain rows written before sealing existed still read, and are sealed on their next save.
struct ItemHeaderCoding: Sendable {
    static let prefix = "sealed:"
    let masterKey: MasterKey?

    func encode(_ headers: [HeaderField], itemID: String) throws -> String {
        let json = try JSONEncoder().encode(headers)
        guard let masterKey, !headers.isEmpty else { return String(decoding: json, as: UTF8.self) }
        return Self.prefix + Data(try masterKey.seal(Array(json), context: Self.context(itemID))).base64EncodedString()
    }

    /// The headers; empty when they are sealed and cannot be opened here (no or another master key): the
    /// downloads then go without them and the origin's answer says what is missing.
    func decode(_ text: String, itemID: String) throws -> [HeaderField] {
        guard text.hasPrefix(Self.prefix) else { return try JSONDecoder().decode([HeaderField].self, from: Data(text.utf8)) }
        guard let masterKey, let sealed = Data(base64Encoded: String(text.dropFirst(Self.prefix.count))),
            let plain = masterKey.unseal(Array(sealed), context: Self.context(itemID))
        else { return [] }
        return try JSONDecoder().decode([HeaderField].self, from: Data(plain))
    }

    private static func context(_ itemID: String) -> String { "hlscache-item-headers:" + itemID }
}
