import Foundation

/// One request header given to an item (`--header 'Name: value'`), sent with every origin request it makes.
public struct HeaderField: Sendable, Hashable, Codable {
    /// The header name.
    public var name: String
    /// The header value.
    public var value: String

    /// A header.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Parses `Name: value`; `nil` when there is no colon or the name is empty or not a token.
    public init?(parsing line: String) {
        guard let colon = line.firstIndex(of: ":") else { return nil }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces)
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        guard !name.isEmpty, name.allSatisfy({ token.contains($0) }), !value.contains("\r"), !value.contains("\n") else { return nil }
        self.name = name
        self.value = value
    }
}
