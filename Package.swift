// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6)
]

let nio: [Target.Dependency] = [
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "NIOHTTP1", package: "swift-nio"),
    .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
]

let package = Package(
    name: "hlscache",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "hlscache", targets: ["hlscache"]),
        .library(name: "HLSPlaylist", targets: ["HLSPlaylist"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // Tests only: an HTTP/2 origin.
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(
            url: "https://github.com/apple/swift-configuration", from: "1.4.0",
            traits: [.defaults, "YAML", "CommandLineArguments"]),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    ],
    targets: [
        // Pure playlist engine: no I/O, no NIO, no Foundation networking.
        .target(name: "HLSPlaylist", swiftSettings: swiftSettings),
        // The URL contract and cache-key rules shared by the proxy, the downloader and the CLI. Pure.
        .target(name: "HLSCacheCore", dependencies: ["HLSPlaylist"], swiftSettings: swiftSettings),
        // System OpenSSL 3's libcrypto (libssl-dev): AES-128-CBC, AES-256-GCM, SHA-256, RAND_bytes. No TLS: libssl is
        // not linked (origins' TLS is swift-nio-ssl's BoringSSL).
        .systemLibrary(name: "CLibSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // System zlib (zlib1g-dev): one-shot gzip of rewritten playlists; decoding gzip/deflate origin bodies.
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // Thin, safe Swift wrappers over the few OpenSSL primitives the cache needs.
        .target(name: "HLSCrypto", dependencies: ["CLibSSL"], swiftSettings: swiftSettings),
        // The on-disk cache: objects/ named by SHA-256, tmp/ for writes, a GRDB index shared by two processes.
        .target(
            name: "HLSCacheStore",
            dependencies: [
                "HLSCacheCore", "HLSCrypto", .product(name: "GRDB", package: "GRDB.swift"),
                // sqlite3_file_control, for the persistent WAL (SQLiteFiles).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
        // The origin client: streaming fetches with backpressure, retries, redirects and the destination policy.
        .target(
            name: "HLSOrigin",
            dependencies: [
                "HLSCacheCore", "HLSPlaylist", "CZlib",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ] + nio,
            swiftSettings: swiftSettings
        ),
        // AES-128 keys: ids, the encrypted key store (own SQLite file), fetching, expiry, renewal, access policy.
        .target(
            name: "HLSKeys",
            dependencies: [
                "HLSCacheCore", "HLSCrypto", "HLSOrigin", "HLSCacheStore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP server: routing, cache hits with sendfile, coalesced misses, playlist rewriting.
        .target(
            name: "HLSProxy",
            dependencies: [
                "HLSCacheCore", "HLSPlaylist", "HLSCacheStore", "HLSOrigin", "HLSKeys", "HLSCrypto", "CZlib",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ] + nio,
            swiftSettings: swiftSettings
        ),
        // The prewarmer: items (GRDB, their own file), rendition selection, the download engine and scheduler.
        .target(
            name: "HLSDownloader",
            dependencies: [
                "HLSCacheCore", "HLSPlaylist", "HLSCacheStore", "HLSOrigin", "HLSKeys",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ] + nio,
            swiftSettings: swiftSettings
        ),
        // Settings: Config/hlscache.yaml, HLSCACHE_* environment variables and flags, layered over the defaults.
        .target(
            name: "HLSConfig",
            dependencies: [
                "HLSCacheCore", "HLSOrigin", "HLSKeys", "HLSProxy", "HLSDownloader",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The admin API (/api/v1), Server-Sent Events, playback records and the console: above the proxy and the
        // downloader, plugged into the proxy as its route extension.
        .target(
            name: "HLSAdmin",
            dependencies: [
                "HLSCacheCore", "HLSPlaylist", "HLSCacheStore", "HLSKeys", "HLSProxy", "HLSDownloader", "HLSCrypto",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ] + nio,
            // The console's page, style sheet and script, compiled into the binary as byte arrays (no bundle to ship).
            resources: [
                .embedInCode("Console/Resources/console.html"), .embedInCode("Console/Resources/console.css"),
                .embedInCode("Console/Resources/console.js"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "hlscache",
            dependencies: [
                "HLSCacheCore", "HLSCacheStore", "HLSOrigin", "HLSKeys", "HLSProxy", "HLSDownloader", "HLSConfig", "HLSAdmin",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ] + nio,
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "PlaylistBenchmark",
            dependencies: ["HLSPlaylist", "HLSCacheCore"],
            path: "Benchmarks/PlaylistBenchmark",
            swiftSettings: swiftSettings
        ),
        // What tests share: the test origin (a directory, overrides and injected faults), ffmpeg as stream maker and
        // player, child processes and own-thread waits, the CLI binary, random and pattern bytes.
        .target(
            name: "HLSTestSupport",
            dependencies: [
                "HLSProxy", "HLSDownloader", "HLSKeys", "HLSOrigin", "HLSCacheStore", "HLSCacheCore", "HLSCrypto", "CZlib",
                .product(name: "Logging", package: "swift-log"),
            ] + nio,
            path: "Tests/HLSTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HLSPlaylistTests", dependencies: ["HLSPlaylist", "HLSTestSupport"], exclude: ["Fixtures", "FuzzRegressions"],
            swiftSettings: swiftSettings),
        .testTarget(name: "HLSCacheCoreTests", dependencies: ["HLSCacheCore", "HLSPlaylist"], swiftSettings: swiftSettings),
        .testTarget(name: "HLSCryptoTests", dependencies: ["HLSCrypto", "HLSTestSupport"], swiftSettings: swiftSettings),
        .testTarget(
            name: "HLSCacheStoreTests",
            dependencies: ["HLSCacheStore", "HLSCacheCore", "HLSTestSupport", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "HLSOriginTests",
            dependencies: ["HLSOrigin", "HLSCacheCore", "HLSTestSupport", .product(name: "Logging", package: "swift-log")] + nio,
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HLSKeysTests",
            dependencies: ["HLSKeys", "HLSCacheCore", "HLSCrypto", "HLSOrigin", .product(name: "NIOHTTP1", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HLSProxyTests",
            dependencies: [
                "HLSProxy", "HLSKeys", "HLSCacheCore", "HLSCacheStore", "HLSCrypto", "HLSOrigin", "HLSPlaylist", "HLSDownloader",
                "HLSTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "Logging", package: "swift-log"),
            ] + nio,
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HLSDownloaderTests",
            dependencies: [
                "HLSDownloader", "HLSPlaylist", "HLSCacheStore", "HLSCacheCore", "HLSKeys", "HLSOrigin", "HLSTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Logging", package: "swift-log"),
            ] + nio,
            swiftSettings: swiftSettings),
        .testTarget(
            name: "HLSConfigTests",
            dependencies: ["HLSConfig", "HLSCacheCore", "HLSOrigin", "HLSKeys", "HLSProxy", "HLSDownloader"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HLSAdminTests",
            dependencies: [
                "hlscache", "HLSAdmin", "HLSProxy", "HLSKeys", "HLSCacheCore", "HLSCacheStore", "HLSOrigin", "HLSDownloader",
                "HLSTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ] + nio,
            // Run by the tests with python3, read from the source tree (#filePath).
            exclude: ["openapi_validate.py"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CLITests",
            dependencies: [
                "hlscache", "HLSConfig", "HLSKeys", "HLSDownloader", "HLSCacheCore", "HLSOrigin", "HLSTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
