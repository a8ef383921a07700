import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSKeys
import HLSOrigin

extension Downloader {
    /// Stores one key (any method) for `item` in the key store and returns its size.
    ///
    /// The key store fetches it (with the origin's configured headers and the item's), checks its length against
    /// the method, seals it under the master key and keeps it until the last item holding it expires; the proxy
    /// serves it from `/keys/{id}`. A key is never a cache object.
    /// - Throws: ``DownloadError/keyUnavailable`` when the key cannot be fetched or is not 16 or 32 bytes.
    func storeKey(_ resource: PlannedResource, for item: DownloadItem) async throws -> Int64 {
        let itemExpiry = Self.latest(of: try items.expiries(ofItemsListing: resource.key.value, except: item.id) + [item.expiresAt])
        do {
            // The item's headers (a cookie the key server wants, say) go with this fetch and every renewal.
            let id = try keys.register(
                resource.url, itemExpiry: itemExpiry, headers: item.headers.map { ($0.name, $0.value) }, method: resource.keyMethod)
            return Int64(try await keys.key(id, via: keyRequestURL(resource.url, id: id, for: item)).count)
        } catch {
            // An unavailable key server is waited for like any origin (the item goes `idle`, not `failed`).
            throw DownloadError.keyUnavailable.with("key \(resource.url): \(error.message)").transient(error.isTransient)
        }
    }

    /// The keys of an item with where each stands (valid until when, expired, pending), for `show` and
    /// the API.
    /// - Parameter keyResources: the item's key resources when the caller read them already (a listing page reads
    ///   every item's in one query).
    package func keyStatus(of id: String, keyResources: [ItemResource]? = nil) throws(DownloadError) -> [ItemKeyStatus] {
        var statuses: [ItemKeyStatus] = []
        let resources: [ItemResource]
        if let keyResources {
            resources = keyResources
        } else {
            resources = try items.resources(id, kind: CacheObjectKind.key.rawValue)
        }
        for resource in resources {
            guard let url = try? OriginURL(resource.url) else { continue }
            let keyID = keys.id(for: url)
            let record: KeyRecord?
            do throws(KeyError) {
                record = try keys.record(keyID)
            } catch {
                throw DownloadError.keyUnavailable.with("key store: \(error.message)")
            }
            statuses.append(
                ItemKeyStatus(
                    id: keyID.value, host: url.host, state: record.map { keys.state(of: $0) } ?? .pending, expiresAt: record?.expiresAt))
        }
        return statuses
    }

    /// A key item `id` shared with other live items, once `id` is removed or expired: it is served as long as the
    /// latest of those others, no longer as long as `id` (the longest-lived holder may be the one that went).
    func limitKey(_ resource: ItemResource, toItemsOtherThan id: String) throws(DownloadError) {
        guard let url = try? OriginURL(resource.url) else { return }
        let holders = try items.expiries(ofItemsListing: resource.key, except: id)
        guard !holders.isEmpty else { return }
        do throws(KeyError) {
            try keys.register(url, itemExpiry: Self.latest(of: holders))
        } catch {
            logger.warning("could not limit the key of \(url.redacted) to the items still holding it: \(error.message)")
        }
    }

    /// The limit items with `expiries` put on a key they share: the latest of them, none if one never expires.
    static func latest(of expiries: [Date?]) -> ItemExpiry {
        guard !expiries.contains(where: { $0 == nil }), let latest = expiries.compactMap({ $0 }).max() else { return .never }
        return .at(latest)
    }

    /// Drops the stored copy of an item's key when the item goes (deleted, expired).
    func forgetKey(_ resource: ItemResource) {
        guard let url = try? OriginURL(resource.url) else { return }
        do throws(KeyError) {
            try keys.forget(keys.id(for: url))
        } catch {
            logger.warning("could not purge key of \(resource.url): \(error.message)")
        }
    }

    /// Decrypts the last block of each AES-128 segment in a stored file — the whole file, or each byte range of
    /// it — and checks its PKCS#7 padding: a wrong key or IV, or a damaged body, becomes `corrupted` now instead
    /// of a decoding error at playback. The file is removed then (the key is needed in plaintext, in memory only).
    ///
    /// A key a check fails with is not trusted any more (``KeyService/distrust(_:key:reason:)``): the stored copy
    /// is dropped and fetched again from the origin, and the check is repeated once if the origin now sends other
    /// bytes. So a wrong key an origin answered with 200 — stored, and before this served as valid for the whole
    /// key TTL — is replaced in the same run once the origin sends the right one, and a failed item's `resume`,
    /// or the proxy, fetches the key again instead of reusing the wrong copy. If the segment was the damaged part,
    /// the refetch brings the same key back and the item fails `corrupted` as before.
    func verify(_ resource: PlannedResource) async throws {
        guard let object = store.lookup(resource.key) else { return }
        var plainKeys: [OriginURL: [UInt8]] = [:]
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: object.path))
        } catch {
            throw DownloadError.corrupted.with("segment \(resource.url) cannot be read back: \(error)")
        }
        defer { try? handle.close() }
        for encryption in resource.encryptions {
            let (offset, length) = encryption.range ?? (0, object.size)
            let what =
                encryption.range.map { "segment \(resource.url) bytes \($0.offset)-\($0.offset + $0.length - 1)" }
                ?? "segment \(resource.url)"
            let tail: [UInt8]
            do {
                guard length >= 16, length % 16 == 0 else {
                    throw DownloadError.corrupted.with("\(what) is \(length) bytes, not whole AES blocks")
                }
                guard offset + length <= object.size else {
                    throw DownloadError.corrupted.with("\(what) is past the end of the \(object.size)-byte file")
                }
                let count = min(32, length)
                try handle.seek(toOffset: UInt64(offset + length - count))
                tail = [UInt8](try handle.read(upToCount: Int(count)) ?? Data())
                guard tail.count == Int(count) else { throw DownloadError.corrupted.with("\(what) is shorter than indexed") }
            } catch let error as DownloadError {
                _ = try? store.remove(resource.key)
                throw error
            }
            let id: KeyID
            let key: [UInt8]
            do {
                id = try keys.register(encryption.keyURL)
                if let known = plainKeys[encryption.keyURL] {
                    key = known
                } else {
                    key = try await keys.key(id)
                }
            } catch {
                throw DownloadError.keyUnavailable.with("key \(encryption.keyURL): \(error.message)").transient(error.isTransient)
            }
            do {
                plainKeys[encryption.keyURL] = try await check(tail, iv: encryption.iv, key: key, id: id, keys: keys)
            } catch {
                _ = try? store.remove(resource.key)
                throw DownloadError.corrupted.with("\(what): \(error.message)")
            }
        }
    }

    /// Checks one segment's last blocks with `key`; if that fails, distrusts the key, fetches it again and, when
    /// the origin now sends other bytes, checks with those.
    /// - Returns: the key the segment passed with.
    /// - Throws: ``KeyError/corrupted`` when it passes with neither (the key is left distrusted: not stored).
    private func check(_ tail: [UInt8], iv: [UInt8], key: [UInt8], id: KeyID, keys: KeyService) async throws(KeyError) -> [UInt8] {
        let failure: KeyError
        do throws(KeyError) {
            try SegmentVerification.verifySegment(lastTwoBlocks: tail, key: key, iv: iv)
            return key
        } catch {
            failure = error
        }
        let reason = "a segment did not decrypt with it (invalid PKCS#7 padding)"
        _ = try? keys.distrust(id, key: key, reason: reason)
        let fresh: [UInt8]
        do throws(KeyError) {
            fresh = try await keys.key(id)
        } catch {
            throw KeyError.corrupted.with(
                "no valid PKCS#7 padding with the stored key, and fetching the key again failed (\(error.message))")
        }
        if fresh != key, (try? SegmentVerification.verifySegment(lastTwoBlocks: tail, key: fresh, iv: iv)) != nil {
            logger.info("key \(id) was replaced: the stored copy did not decrypt a segment, the origin's current one does")
            return fresh
        }
        _ = try? keys.distrust(id, key: fresh, reason: reason)
        throw failure
    }
}
