/// File names inside a store directory.
package enum LogFileNames {
    /// `00000000000000001234.log` for base offset 1234.
    package static func segment(_ baseOffset: UInt64) -> String {
        padded(baseOffset) + FormatConstants.segmentFileExtension
    }

    static func index(_ baseOffset: UInt64) -> String {
        padded(baseOffset) + FormatConstants.indexFileExtension
    }

    /// `checkpoint-00000000000000001234.ckpt` for offset 1234.
    static func checkpoint(_ offset: UInt64) -> String {
        FormatConstants.checkpointFilePrefix + padded(offset) + FormatConstants.checkpointFileExtension
    }

    static func padded(_ value: UInt64) -> String {
        let digits = String(value)
        return String(repeating: "0", count: FormatConstants.fileNameDigitCount - digits.count) + digits
    }

    /// The base offset a segment file name encodes, or `nil` if it is not a segment name.
    package static func segmentBaseOffset(_ name: String) -> UInt64? {
        number(name, extension: FormatConstants.segmentFileExtension)
    }

    static func indexBaseOffset(_ name: String) -> UInt64? {
        number(name, extension: FormatConstants.indexFileExtension)
    }

    /// The offset in `checkpoint-<20 digits>.ckpt`, or `nil`.
    static func checkpointOffset(_ name: String) -> UInt64? {
        guard name.hasPrefix(FormatConstants.checkpointFilePrefix) else { return nil }
        return number(
            String(name.dropFirst(FormatConstants.checkpointFilePrefix.count)),
            extension: FormatConstants.checkpointFileExtension)
    }

    /// A temporary file the engine itself makes (`<file>.tmp` for one of its own file names);
    /// other `.tmp` files are the user's and are left alone.
    static func isTemporary(_ name: String) -> Bool {
        guard name.hasSuffix(FormatConstants.temporaryFileExtension) else { return false }
        let target = String(name.dropLast(FormatConstants.temporaryFileExtension.count))
        return target == FormatConstants.storeMetaFileName || segmentBaseOffset(target) != nil
            || indexBaseOffset(target) != nil || checkpointOffset(target) != nil
    }

    private static func number(_ name: String, extension fileExtension: String) -> UInt64? {
        guard name.hasSuffix(fileExtension) else { return nil }
        let digits = name.dropLast(fileExtension.count)
        guard digits.count == FormatConstants.fileNameDigitCount, digits.allSatisfy(\.isASCII),
            digits.allSatisfy(\.isNumber)
        else { return nil }
        // A name past the largest offset a log can reach is not one of ours: offset arithmetic
        // (base + position) would overflow on it (found by fuzzing a segment's base offset).
        guard let value = UInt64(digits), value <= FormatConstants.offsetMax else { return nil }
        return value
    }

    static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}
