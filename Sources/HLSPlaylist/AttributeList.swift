/// One `NAME=value` item of an attribute list, located in the playlist's bytes.
struct RawAttribute {
    var nameStart: Int
    var nameEnd: Int
    /// The value without surrounding quotes.
    var valueStart: Int
    var valueEnd: Int
    var quoted: Bool
}

extension RawAttribute {
    func nameEquals(_ name: StaticString, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = name.utf8CodeUnitCount
        guard nameEnd - nameStart == n else { return false }
        let p = name.utf8Start
        for k in 0..<n where p[k] != bytes[nameStart + k] { return false }
        return true
    }

    func valueEquals(_ value: StaticString, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let n = value.utf8CodeUnitCount
        guard valueEnd - valueStart == n else { return false }
        let p = value.utf8Start
        for k in 0..<n where p[k] != bytes[valueStart + k] { return false }
        return true
    }
}

/// Splits an attribute list (RFC 8216 §4.2) into items, keeping byte positions so a rewrite can replace exactly
/// one value. Tolerates spaces around items (common in hand-made playlists) but not a broken structure.
func scanAttributes(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int, line: Int) throws -> [RawAttribute] {
    var result: [RawAttribute] = []
    var i = start
    let comma = UInt8(ascii: ","), equals = UInt8(ascii: "="), quote = UInt8(ascii: "\"")
    while i < end {
        while i < end, bytes[i] == UInt8(ascii: " ") || bytes[i] == UInt8(ascii: "\t") { i += 1 }
        if i == end { break }
        let nameStart = i
        while i < end, bytes[i] != equals, bytes[i] != comma, bytes[i] != quote { i += 1 }
        var nameEnd = i
        while nameEnd > nameStart, bytes[nameEnd - 1] == UInt8(ascii: " ") { nameEnd -= 1 }
        if i == end {
            throw PlaylistError.truncatedAttributeList.at(line: line, "attribute without value")
        }
        guard bytes[i] == equals, nameEnd > nameStart else {
            throw PlaylistError.invalidAttribute.at(line: line, "expected NAME=value at column \(i - start + 1)")
        }
        i += 1
        if i == end { throw PlaylistError.truncatedAttributeList.at(line: line, "attribute list ends after '='") }
        if bytes[i] == quote {
            let valueStart = i + 1
            var j = valueStart
            while j < end, bytes[j] != quote { j += 1 }
            if j == end { throw PlaylistError.truncatedAttributeList.at(line: line, "unterminated quoted string") }
            result.append(RawAttribute(nameStart: nameStart, nameEnd: nameEnd, valueStart: valueStart, valueEnd: j, quoted: true))
            i = j + 1
            while i < end, bytes[i] == UInt8(ascii: " ") || bytes[i] == UInt8(ascii: "\t") { i += 1 }
            if i < end {
                guard bytes[i] == comma else {
                    throw PlaylistError.invalidAttribute.at(line: line, "expected ',' after quoted string")
                }
                i += 1
            }
        } else {
            let valueStart = i
            while i < end, bytes[i] != comma { i += 1 }
            var valueEnd = i
            while valueEnd > valueStart, bytes[valueEnd - 1] == UInt8(ascii: " ") || bytes[valueEnd - 1] == UInt8(ascii: "\t") {
                valueEnd -= 1
            }
            if valueEnd == valueStart {
                throw PlaylistError.truncatedAttributeList.at(line: line, "empty attribute value")
            }
            result.append(RawAttribute(nameStart: nameStart, nameEnd: nameEnd, valueStart: valueStart, valueEnd: valueEnd, quoted: false))
            if i < end { i += 1 }
        }
    }
    return result
}

/// ``scanAttributes(_:from:to:line:)`` for the tolerant reader: never throws; an item that does not parse (no `=`,
/// an empty value, garbage after a quoted string) is skipped up to the next comma, an unterminated quoted string
/// ends the list. `malformed` says whether anything was skipped.
func scanAttributesLeniently(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int) -> (items: [RawAttribute], malformed: Bool)
{
    var result: [RawAttribute] = []
    var malformed = false
    var i = start
    let comma = UInt8(ascii: ","), equals = UInt8(ascii: "="), quote = UInt8(ascii: "\"")
    func skipSpace() { while i < end, bytes[i] == UInt8(ascii: " ") || bytes[i] == UInt8(ascii: "\t") { i += 1 } }
    func skipToComma() {
        while i < end, bytes[i] != comma { i += 1 }
        if i < end { i += 1 }
    }
    while i < end {
        skipSpace()
        if i == end { break }
        let nameStart = i
        while i < end, bytes[i] != equals, bytes[i] != comma, bytes[i] != quote { i += 1 }
        var nameEnd = i
        while nameEnd > nameStart, bytes[nameEnd - 1] == UInt8(ascii: " ") { nameEnd -= 1 }
        guard i < end, bytes[i] == equals, nameEnd > nameStart else {
            malformed = true
            if i < end, bytes[i] == quote {
                // A stray quoted string: skip it whole, commas inside included.
                i += 1
                while i < end, bytes[i] != quote { i += 1 }
                if i < end { i += 1 }
            }
            skipToComma()
            continue
        }
        i += 1
        if i < end, bytes[i] == quote {
            let valueStart = i + 1
            var j = valueStart
            while j < end, bytes[j] != quote { j += 1 }
            if j == end {
                malformed = true
                break
            }
            result.append(RawAttribute(nameStart: nameStart, nameEnd: nameEnd, valueStart: valueStart, valueEnd: j, quoted: true))
            i = j + 1
            skipSpace()
            if i < end, bytes[i] != comma { malformed = true }
            skipToComma()
        } else {
            let valueStart = i
            while i < end, bytes[i] != comma { i += 1 }
            var valueEnd = i
            while valueEnd > valueStart, bytes[valueEnd - 1] == UInt8(ascii: " ") || bytes[valueEnd - 1] == UInt8(ascii: "\t") {
                valueEnd -= 1
            }
            if valueEnd == valueStart {
                malformed = true
            } else {
                result.append(
                    RawAttribute(nameStart: nameStart, nameEnd: nameEnd, valueStart: valueStart, valueEnd: valueEnd, quoted: false))
            }
            if i < end { i += 1 }
        }
    }
    return (result, malformed)
}

/// The attributes of one tag, decoded to strings, in their original order.
public struct AttributeList: Sendable, Hashable {
    public struct Item: Sendable, Hashable {
        public var name: String
        public var value: String
        /// Whether the value was written as a quoted-string.
        public var quoted: Bool
    }

    public private(set) var items: [Item]
    /// Numbers are read as players read them (``Playlist/isTolerant``).
    var tolerant = false

    init(_ raw: [RawAttribute], _ bytes: UnsafeBufferPointer<UInt8>, tolerant: Bool = false) {
        self.tolerant = tolerant
        items = raw.map {
            Item(
                name: String(decoding: UnsafeBufferPointer(rebasing: bytes[$0.nameStart..<$0.nameEnd]), as: UTF8.self),
                value: String(decoding: UnsafeBufferPointer(rebasing: bytes[$0.valueStart..<$0.valueEnd]), as: UTF8.self),
                quoted: $0.quoted)
        }
    }

    /// The value of the first attribute called `name`.
    public subscript(name: String) -> String? {
        items.first { $0.name == name }?.value
    }

    func integer(_ name: String, line: Int, max: UInt64 = UInt64.max) throws -> UInt64? {
        guard let text = self[name] else { return nil }
        if tolerant {
            guard let (value, _) = Numbers.tolerantInteger(text), value <= max else { return nil }
            return value
        }
        return try Numbers.integer(text, line: line, what: name, max: max)
    }

    func decimal(_ name: String, line: Int, range: ClosedRange<Double>) throws -> Double? {
        guard let text = self[name] else { return nil }
        if tolerant { return try? Numbers.decimal(text, line: line, what: name, range: range) }
        return try Numbers.decimal(text, line: line, what: name, range: range)
    }

    func flag(_ name: String) -> Bool { self[name] == "YES" }
}
