/// The version printed by `hlscache --version` and sent as the origin client's User-Agent.
public enum HLSCacheVersion {
    public static let current = "0.1.0"
    public static let userAgent = "hlscache/\(current)"
}
