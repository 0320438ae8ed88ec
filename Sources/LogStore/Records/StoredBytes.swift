import Foundation

extension Array where Element == UInt8 {
    /// Whether these are the same bytes as `bytes` (a payload's, read in place): what the history
    /// reader compares authors and process identifiers with, record by record, without making an
    /// array or a string of them.
    func hasSameBytes(as bytes: UnsafeRawBufferPointer) -> Bool {
        count == bytes.count
            && withUnsafeBytes { own in bytes.isEmpty || memcmp(own.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
    }
}
