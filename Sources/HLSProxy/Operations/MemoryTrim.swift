#if canImport(Glibc)
    import Glibc
#endif

/// Returns memory the process freed to the system.
package enum MemoryTrim {
    /// `malloc_trim(0)`: glibc hands the free pages of every arena back (`madvise`), which it otherwise keeps for
    /// later allocations, so a burst of large temporary allocations stops counting in the RSS. Blocking for a moment
    /// (it walks the arenas): call it off the event loops, after large work only. A no-op without glibc.
    static func giveBackFreedMemory() {
        _ = trim?(0)
    }

    /// Allocations of `bytes` or more are mapped on their own and unmapped when freed (glibc's `M_MMAP_THRESHOLD`,
    /// fixed). By default glibc raises that threshold to the size of the largest block freed (up to 32 MiB), after
    /// which a large playlist's copies come from the heap and stay there once freed. A no-op without glibc.
    package static func mapAllocations(from bytes: Int) {
        #if canImport(Glibc)
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }
            let mallopt = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
            _ = mallopt(-3, Int32(clamping: bytes))  // M_MMAP_THRESHOLD
        #endif
    }

    /// Looked up by name: Swift's Glibc module does not export `malloc.h`; musl has no such function.
    private static let trim: (@convention(c) (Int) -> Int32)? = {
        #if canImport(Glibc)
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
            return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
            return nil
        #endif
    }()
}
