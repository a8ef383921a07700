import Foundation

/// Whether `needle` occurs in any file under `directory` (how tests prove a key never reached the disk in the clear).
package func anyFile(under directory: URL, contains needle: [UInt8]) -> Bool {
    guard let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { return false }
    for case let file as URL in files {
        guard let data = try? Data(contentsOf: file) else { continue }
        let bytes = [UInt8](data)
        guard bytes.count >= needle.count else { continue }
        for start in 0...(bytes.count - needle.count) where bytes[start] == needle[0] {
            if bytes[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
    }
    return false
}
