/// A dictionary keyed by key hashes (the 64 hex digits of a key's SHA-256, ``CacheStore/keyHash(_:)``) that hashes
/// only what tells them apart: a hit looks its key hash up in three of these tables (the map, the pins, the pending
/// access times) and removes its pin from one, and hashing the whole 64-character string each time (SipHash over
/// 64 bytes, about 270 instructions) was a tenth of a 2 MiB file hit's instructions (Benchmarks/hit-instructions.sh).
///
/// The string's first 16 digits are 64 bits of a SHA-256: as unpredictable as the whole for the table's seeded
/// hashing, so no one choosing URLs can make the table's keys collide. Strings of another length (none are made,
/// but an index may hold anything) are hashed whole. Equality is the strings' equality, as before.
struct KeyHashTable<Value>: Sequence {
    struct Key: Hashable, Sendable {
        let text: String

        static func == (lhs: Key, rhs: Key) -> Bool { lhs.text == rhs.text }

        func hash(into hasher: inout Hasher) {
            // The same bytes either way, so equal strings hash alike whether or not their storage is contiguous.
            let hashed: Void? = text.utf8.withContiguousStorageIfAvailable { Self.hash(UnsafeRawBufferPointer($0), into: &hasher) }
            if hashed == nil { Array(text.utf8).withUnsafeBytes { Self.hash($0, into: &hasher) } }
        }

        private static func hash(_ bytes: UnsafeRawBufferPointer, into hasher: inout Hasher) {
            guard bytes.count == 64 else {
                hasher.combine(bytes: bytes)
                return
            }
            hasher.combine(bytes.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
            hasher.combine(bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
    }

    private var storage: [Key: Value] = [:]

    typealias Index = [Key: Value].Index

    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }

    subscript(hash: String) -> Value? {
        get { storage[Key(text: hash)] }
        _modify { yield &storage[Key(text: hash)] }
    }

    subscript(hash: String, default value: @autoclosure () -> Value) -> Value {
        get { storage[Key(text: hash), default: value()] }
        _modify { yield &storage[Key(text: hash), default: value()] }
    }

    func index(forKey hash: String) -> Index? { storage.index(forKey: Key(text: hash)) }

    /// The values, to read or change one in place at an ``index(forKey:)``.
    var values: [Key: Value].Values {
        get { storage.values }
        _modify { yield &storage.values }
    }

    @discardableResult
    mutating func remove(at index: Index) -> (key: String, value: Value) {
        let (key, value) = storage.remove(at: index)
        return (key.text, value)
    }

    @discardableResult
    mutating func removeValue(forKey hash: String) -> Value? { storage.removeValue(forKey: Key(text: hash)) }

    mutating func removeAll(keepingCapacity: Bool = false) { storage.removeAll(keepingCapacity: keepingCapacity) }

    func makeIterator() -> some IteratorProtocol<(key: String, value: Value)> {
        storage.lazy.map { (key: $0.key.text, value: $0.value) }.makeIterator()
    }
}

extension KeyHashTable: Sendable where Value: Sendable {}
