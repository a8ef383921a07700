import Foundation
import HLSCrypto
import Testing

@testable import HLSCacheStore

/// ``KeyHashTable``: the store's maps keyed by key hashes, hashed by their first 16 hex digits.
@Suite struct KeyHashTableTests {
    private func hex(_ seed: Int) -> String { SHA256.hex("key \(seed)") }

    @Test func keysAreTheWholeStrings() {
        var table = KeyHashTable<Int>()
        // Two key hashes alike in their first 16 digits (the part hashed) are still two keys.
        let a = hex(1)
        let b = String(a.prefix(16)) + String(hex(2).dropFirst(16))
        #expect(a != b)
        table[a] = 1
        table[b] = 2
        #expect(table.count == 2 && table[a] == 1 && table[b] == 2)
        // A string of another length is a key like any other, hashed whole.
        table["short"] = 3
        table[String(a.dropLast())] = 4
        #expect(table.count == 4 && table["short"] == 3 && table[String(a.dropLast())] == 4 && table[a] == 1)
        // An equal string made another way (not the same storage) finds the same entry.
        let copy = String(decoding: Array(a.utf8), as: UTF8.self)
        #expect(table[copy] == 1)
        #expect(table.removeValue(forKey: copy) == 1 && table[a] == nil && table.count == 3)
    }

    @Test func manyKeysInPlaceAndIterated() {
        var table = KeyHashTable<Int>()
        let hashes = (0..<5_000).map(hex)
        for (value, hash) in hashes.enumerated() { table[hash, default: 0] += value }
        #expect(table.count == hashes.count)
        // In place through an index, as the store changes a row.
        for hash in hashes {
            guard let index = table.index(forKey: hash) else {
                Issue.record("\(hash) missing")
                return
            }
            table.values[index] += 1
        }
        var seen: [String: Int] = [:]
        for (hash, value) in table { seen[hash] = value }
        #expect(seen == Dictionary(uniqueKeysWithValues: hashes.enumerated().map { ($0.element, $0.offset + 1) }))
        let index = table.index(forKey: hashes[7])!
        let removed = table.remove(at: index)
        #expect(removed.key == hashes[7] && removed.value == 8)
        #expect(table.index(forKey: hashes[7]) == nil && table.count == hashes.count - 1)
        table.removeAll(keepingCapacity: true)
        #expect(table.isEmpty)
    }
}
