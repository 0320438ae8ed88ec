import LogStoreEngine

extension SimulatedFileSystem {
    /// What a power cut keeps of the file data that was not synced. Under every policy,
    /// directory entries revert to their durable state: files created, renamed or removed
    /// since the last ``syncDirectory(_:)`` of their directory are as before.
    public enum PowerCutPolicy: Sendable, Hashable {
        /// Each unsynced sector independently, and the size (durable or current), chosen by a
        /// generator seeded with `seed`: the same seed gives the same result.
        case random(seed: UInt64)
        /// Only synced data survives.
        case nothingUnsynced
        /// Every unsynced write and size change survives (the data of files whose directory
        /// entries survive).
        case everything
    }

    /// A new file system holding what the disk would hold had the power failed now.
    ///
    /// Directory entries are the durable ones. Each surviving file starts from its durable
    /// content; then, per `policy`, its size is the durable or the current one and each sector
    /// written since its last sync holds the current bytes or the durable ones (zeros past
    /// the durable size). Everything in the result is durable.
    ///
    /// Open handles are not carried over, nor are faults or held syncs; the capacity is. This
    /// file system is left unchanged and keeps working.
    public func powerCut(_ policy: PowerCutPolicy) -> SimulatedFileSystem {
        locked { state in SimulatedFileSystem(state: state.afterPowerCut(policy)) }
    }

    /// ``powerCut(_:)`` with ``PowerCutPolicy/random(seed:)``.
    public func powerCut(seed: UInt64) -> SimulatedFileSystem {
        powerCut(.random(seed: seed))
    }

    /// ``powerCut(_:)`` with ``PowerCutPolicy/everything`` or ``PowerCutPolicy/nothingUnsynced``.
    public func powerCut(persistingAllUnsynced: Bool) -> SimulatedFileSystem {
        powerCut(persistingAllUnsynced ? .everything : .nothingUnsynced)
    }
}

extension State {
    func afterPowerCut(_ policy: SimulatedFileSystem.PowerCutPolicy) -> State {
        let result = State()
        result.nextInodeNumber = nextInodeNumber
        result.capacity = capacity
        result.directories = [:]
        var survivors = Set<UInt64>()
        for (path, directory) in directories {
            let copy = Directory(inodeNumber: directory.inodeNumber)
            copy.subdirectories = directory.subdirectories
            // A file entry can collide with a directory made after the file's removal.
            let entries = directory.durable.filter { !directory.subdirectories.contains($0.key) }
            copy.current = entries
            copy.durable = entries
            survivors.formUnion(entries.values)
            result.directories[path] = copy
        }
        for number in survivors {
            let old = inodes[number]!
            let inode = Inode(number: number)
            let content = Self.contentAfterPowerCut(of: old, policy: policy)
            inode.current = content
            inode.durable = content
            result.inodes[number] = inode
        }
        for directory in result.directories.values {
            for number in directory.current.values {
                result.inodes[number]!.currentLinks += 1
                result.inodes[number]!.durableLinks += 1
            }
        }
        return result
    }

    static func contentAfterPowerCut(of inode: Inode, policy: SimulatedFileSystem.PowerCutPolicy) -> [UInt8] {
        switch policy {
        case .nothingUnsynced:
            return inode.durable
        case .everything:
            var content = inode.durable
            Inode.resize(&content, to: inode.current.count)
            copySectors(inode.dirtySectors, from: inode.current, to: &content)
            return content
        case .random(let seed):
            // One generator per inode, so the outcome of a file does not depend on the others.
            var generator = SeededGenerator(seed: seed ^ (inode.number &* 0xD1B5_4A32_D192_ED03))
            let size = generator.nextBool() ? inode.durable.count : inode.current.count
            var content = inode.durable
            Inode.resize(&content, to: size)
            // Sorted: Set order differs between runs, and the draws must not.
            let kept = inode.dirtySectors.sorted().filter { _ in generator.nextBool() }
            copySectors(kept, from: inode.current, to: &content)
            return content
        }
    }

    /// Copies `sectors` of `source` into `target`, within both sizes.
    static func copySectors(_ sectors: some Sequence<Int>, from source: [UInt8], to target: inout [UInt8]) {
        let sectorSize = SimulatedFileSystem.sectorSize
        let limit = min(source.count, target.count)
        for sector in sectors {
            let lower = sector * sectorSize
            let upper = min(lower + sectorSize, limit)
            if lower < upper {
                target.replaceSubrange(lower..<upper, with: source[lower..<upper])
            }
        }
    }
}
