/// The version printed by `hlscache --version` and sent as the origin client's User-Agent.
package enum HLSCacheVersion {
    package static let current = "0.1.0"
    package static let userAgent = "hlscache/\(current)"
}
