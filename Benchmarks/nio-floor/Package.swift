// swift-tools-version:5.9
// The floor of a SwiftNIO HTTP/1.1 server on this machine (Benchmarks/nio-floor.sh): not part of hlscache's package.
import PackageDescription

let package = Package(
    name: "nio-floor",
    dependencies: [.package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2")],
    targets: [
        .executableTarget(
            name: "nio-floor",
            dependencies: [.product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")])
    ]
)
