// swift-tools-version: 6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6)
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
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        // Pure playlist engine: no I/O, no NIO, no Foundation networking.
        .target(name: "HLSPlaylist", swiftSettings: swiftSettings),
        // The URL contract and cache-key rules shared by the proxy, the downloader and the CLI. Pure.
        .target(name: "HLSCacheCore", dependencies: ["HLSPlaylist"], swiftSettings: swiftSettings),
        // The origin client: streaming fetches with backpressure, retries, redirects and the destination policy.
        .target(
            name: "HLSOrigin",
            dependencies: [
                "HLSCacheCore",
                "HLSPlaylist",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "hlscache",
            dependencies: [
                "HLSCacheCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "PlaylistBenchmark",
            dependencies: ["HLSPlaylist"],
            path: "Benchmarks/PlaylistBenchmark",
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "HLSPlaylistTests", dependencies: ["HLSPlaylist"], swiftSettings: swiftSettings),
        .testTarget(name: "HLSCacheCoreTests", dependencies: ["HLSCacheCore"], swiftSettings: swiftSettings),
        .testTarget(
            name: "HLSOriginTests",
            dependencies: [
                "HLSOrigin",
                "HLSCacheCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "CLITests", dependencies: ["hlscache"], swiftSettings: swiftSettings),
    ]
)
