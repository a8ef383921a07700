import Foundation

/// One request header given to an item (`--header 'Name: value'`), sent with every origin request it makes.
package struct HeaderField: Sendable, Hashable, Codable {
    /// The header name.
    package var name: String
    /// The header value.
    package var value: String

    /// A header.
    package init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Parses `Name: value`; `nil` when there is no colon or the name is empty or not a token.
    package init?(parsing line: String) {
        guard let colon = line.firstIndex(of: ":") else { return nil }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces)
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        guard !name.isEmpty, name.allSatisfy({ token.contains($0) }), !value.contains("\r"), !value.contains("\n") else { return nil }
        self.name = name
        self.value = value
    }
}
