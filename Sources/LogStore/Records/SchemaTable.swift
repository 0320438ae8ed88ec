import Foundation
import LogStoreEngine

/// The schema intern table stored in the log (DECISIONS.md D5): entity and attribute names mapped
/// to small ids with their value types. Transactions name entities and attributes by id; ids are
/// never reused, so a record encoded with an older table decodes with any newer one.
struct SchemaTable: Sendable, Equatable {
    struct Entity: Sendable, Equatable {
        var id: UInt32
        var name: String
        var attributes: [Attribute]
    }

    struct Attribute: Sendable, Equatable {
        var id: UInt32
        var name: String
        var valueType: ValueType
        var isOptional: Bool
    }

    /// Increases with every schema record; a transaction names the version it was encoded with.
    var version: UInt32 = 0
    /// The live entities: what saves encode with and fetches know.
    var entities: [Entity] = []
    private(set) var nextEntityID: UInt32 = 1
    private(set) var nextAttributeID: UInt32 = 1

    /// For the decoder: the next ids as a record states them (checked by ``checkIdentifiers()``).
    mutating func restoreNextIDs(entity: UInt32, attribute: UInt32) {
        nextEntityID = entity
        nextAttributeID = attribute
    }

    /// The ``SchemaMigrationPlan`` version the store is at, once a plan opened it.
    var versionIdentifier: Schema.Version?
    /// Entities a migration removed, with their attributes as they were: their ids are never
    /// reused, and a history record that names them is read without their changes.
    var retiredEntities: [Entity] = []
    /// Attributes a migration removed from a live entity: a history record read with this table
    /// leaves their values out.
    var retiredAttributes: [RetiredAttribute] = []

    struct RetiredAttribute: Sendable, Equatable {
        var entityID: UInt32
        var id: UInt32
        var name: String
    }

    func entity(named name: String) -> Entity? { entities.first { $0.name == name } }
    func entity(id: UInt32) -> Entity? { entities.first { $0.id == id } }

    /// Whether the table needs the version-2 schema payload (a migration wrote it).
    var needsVersion2: Bool { versionIdentifier != nil || !retiredEntities.isEmpty || !retiredAttributes.isEmpty }

    /// Compares the stored table with the schema in code (no plan). Returns the table extended
    /// with what code adds (new entities, new optional attributes, new attributes with a
    /// default) and renames (`originalName`), or `nil` when nothing is new. Anything else (a
    /// removed or retyped property or entity, a new required attribute without a default)
    /// throws ``LogStoreError/schemaMismatch``: removals need a ``SchemaMigrationPlan``.
    func extended(toCover schema: Schema) throws(LogStoreError) -> SchemaMigration? {
        try migrated(to: schema, versionIdentifier: versionIdentifier, allowsRemovals: false)
    }

    /// The table for `schema` and the steps that take the stored models there, or `nil` when
    /// the table already describes `schema` at `versionIdentifier`.
    ///
    /// - Properties match stored attributes by name, then by `originalName` (a rename: the
    ///   attribute keeps its id, so older records read under the new name).
    /// - A matched attribute keeps its value type; optional to required needs a default value
    ///   (stored models without a value get it: a fill step); required to optional is free.
    /// - A new attribute must be optional, have a default, be a to-many relationship, or — with
    ///   `allowsUnfilledRequired`, for a custom stage's `didMigrate` to fill — anything.
    /// - Stored attributes and entities the schema lacks are removed when `allowsRemovals`
    ///   (retired: their ids are never reused), else `schemaMismatch`.
    func migrated(
        to schema: Schema, versionIdentifier: Schema.Version?, allowsRemovals: Bool,
        allowsUnfilledRequired: Bool = false
    ) throws(LogStoreError) -> SchemaMigration? {
        var table = self
        var steps: [SchemaMigration.Step] = []
        var changed = versionIdentifier != self.versionIdentifier
        table.versionIdentifier = versionIdentifier
        for entity in schema.entities {
            let properties = entity.properties
            guard let index = table.entities.firstIndex(where: { $0.name == entity.name }) else {
                table.entities.append(Entity(id: table.nextEntityID, name: entity.name, attributes: []))
                table.nextEntityID += 1
                for property in properties { table.add(property, toEntityAt: table.entities.count - 1) }
                changed = true
                continue
            }
            let stored = table.entities[index]
            // property name → index of the stored attribute it continues: same name first, then originalName.
            var matches: [String: Int] = [:]
            var claimed: Set<Int> = []
            for property in properties {
                if let position = stored.attributes.firstIndex(where: { $0.name == property.name }) {
                    matches[property.name] = position
                    claimed.insert(position)
                }
            }
            for property in properties where matches[property.name] == nil {
                guard let original = property.originalName,
                    let position = stored.attributes.firstIndex(where: { $0.name == original }),
                    !claimed.contains(position)
                else { continue }
                matches[property.name] = position
                claimed.insert(position)
            }
            for (position, attribute) in stored.attributes.enumerated() where !claimed.contains(position) {
                guard allowsRemovals else {
                    throw .schemaMismatch(
                        entity: entity.name, attribute: attribute.name,
                        reason: "the store has this attribute but the schema in code does not")
                }
                steps.append(.removeAttribute(entity: stored.name, entityID: stored.id, attributeID: attribute.id, name: attribute.name))
                table.retiredAttributes.append(RetiredAttribute(entityID: stored.id, id: attribute.id, name: attribute.name))
                changed = true
            }
            var attributes: [Attribute] = []
            for (position, var attribute) in stored.attributes.enumerated() where claimed.contains(position) {
                let property = properties.first { matches[$0.name] == position }!
                guard attribute.valueType == property.valueType else {
                    throw .schemaMismatch(
                        entity: entity.name, attribute: property.name,
                        reason: "stored as \(attribute.valueType)\(attribute.isOptional ? "?" : ""), "
                            + "declared as \(property.valueType)\(property.isOptional ? "?" : "")")
                }
                if attribute.name != property.name {
                    steps.append(.renameAttribute(entity: stored.name, entityID: stored.id, attributeID: attribute.id,
                                                  from: attribute.name, to: property.name))
                    attribute.name = property.name
                    changed = true
                }
                if attribute.isOptional && !property.isOptional {
                    // Optional to required: stored models without a value get the default.
                    guard let value = property.defaultValue, !value.isNull, value.referencedIdentifiers.isEmpty else {
                        throw .schemaMismatch(
                            entity: entity.name, attribute: property.name,
                            reason: "stored as optional, declared as required: give it a default value "
                                + "(stored models without a value get it) or fill it in a custom stage")
                    }
                    steps.append(.fill(entity: stored.name, entityID: stored.id, attributeID: attribute.id,
                                       name: property.name, value: value))
                    attribute.isOptional = false
                    changed = true
                } else if !attribute.isOptional && property.isOptional {
                    attribute.isOptional = true
                    changed = true
                }
                attributes.append(attribute)
            }
            table.entities[index].attributes = attributes
            for property in properties where matches[property.name] == nil {
                // Older records have no value for it: only an optional or defaulted attribute can be added.
                guard property.isOptional || property.defaultValue != nil || Self.defaultsToEmpty(property)
                    || allowsUnfilledRequired
                else {
                    throw .schemaMismatch(
                        entity: entity.name, attribute: property.name,
                        reason: "a new attribute must be optional or have a default value")
                }
                table.add(property, toEntityAt: index)
                changed = true
                // A required attribute with a default: stored models get the default, so the
                // fold holds what every reader (a predicate, a fetch) would otherwise imply.
                if !property.isOptional, let value = property.defaultValue, !value.isNull,
                    value.referencedIdentifiers.isEmpty, !Self.isReference(property.valueType)
                {
                    let attribute = table.entities[index].attributes.last!
                    steps.append(.fill(entity: stored.name, entityID: stored.id, attributeID: attribute.id,
                                       name: property.name, value: value))
                }
            }
        }
        for stored in table.entities where schema.entity(named: stored.name) == nil {
            guard allowsRemovals else {
                throw .schemaMismatch(
                    entity: stored.name, attribute: nil,
                    reason: "the store has this entity but the schema in code does not")
            }
            steps.append(.removeEntity(entity: stored.name, entityID: stored.id))
            table.retiredEntities.append(stored)
            changed = true
        }
        table.entities.removeAll { schema.entity(named: $0.name) == nil }
        guard changed else { return nil }
        table.version += 1
        return SchemaMigration(table: table, steps: steps)
    }

    private static func isReference(_ valueType: ValueType) -> Bool {
        switch valueType {
        case .reference, .array(.reference): true
        default: false
        }
    }

    /// To-many relationships default to an empty array, so they may always be added.
    private static func defaultsToEmpty(_ property: Schema.Property) -> Bool {
        if case .array = property.valueType { return true }
        return false
    }

    private mutating func add(_ property: Schema.Property, toEntityAt index: Int) {
        entities[index].attributes.append(
            Attribute(
                id: nextAttributeID, name: property.name,
                valueType: property.valueType, isOptional: property.isOptional))
        nextAttributeID += 1
    }

    /// Ids are unique and below the next ids, names unique among live entities and attributes:
    /// a record that checks out under its CRC but breaks this was not written by a correct
    /// writer, and is refused, not trusted.
    func checkIdentifiers() throws(ByteReaderError) {
        guard nextEntityID < UInt32.max, nextAttributeID < UInt32.max else { throw .malformed("next id out of range") }
        var entityIDs: Set<UInt32> = []
        var entityNames: Set<String> = []
        var attributeIDs: Set<UInt32> = []
        for entity in entities {
            guard entity.id < nextEntityID, entityIDs.insert(entity.id).inserted,
                entityNames.insert(entity.name).inserted
            else {
                throw .malformed(
                    "entity \(entity.name) (id \(entity.id)) repeats an id or a name, or is beyond the next id")
            }
            var names: Set<String> = []
            for attribute in entity.attributes {
                guard attribute.id < nextAttributeID, attributeIDs.insert(attribute.id).inserted,
                    names.insert(attribute.name).inserted
                else {
                    throw .malformed(
                        "attribute \(entity.name).\(attribute.name) (id \(attribute.id)) repeats an id or a name")
                }
            }
        }
        for entity in retiredEntities {
            guard entity.id < nextEntityID, entityIDs.insert(entity.id).inserted else {
                throw .malformed("removed entity \(entity.name) (id \(entity.id)) repeats an id or is beyond the next id")
            }
            for attribute in entity.attributes {
                guard attribute.id < nextAttributeID, attributeIDs.insert(attribute.id).inserted else {
                    throw .malformed("attribute \(entity.name).\(attribute.name) (id \(attribute.id)) repeats an id")
                }
            }
        }
        for attribute in retiredAttributes {
            guard attribute.id < nextAttributeID, attributeIDs.insert(attribute.id).inserted,
                entities.contains(where: { $0.id == attribute.entityID })
                    || retiredEntities.contains(where: { $0.id == attribute.entityID })
            else {
                throw .malformed("removed attribute \(attribute.name) (id \(attribute.id)) repeats an id or names no entity")
            }
        }
    }

    // MARK: Record payload

    /// The table alone, as a checkpoint copies it (a schema record without steps).
    func encoded() -> [UInt8] { SchemaMigration(table: self, steps: []).encoded() }

    /// A table with no steps (checkpoint headers, and the tools that only want the names).
    static func decode(_ bytes: [UInt8]) throws(ByteReaderError) -> SchemaTable {
        try SchemaMigration.decode(bytes).table
    }
}

/// A schema record's payload: the intern table after it, and the steps that take the stored
/// models from the table before it (DECISIONS.md D5, docs/FORMAT.md §7.1). A record without steps
/// only adds; with steps it is a migration, applied by replay at its place in the log.
struct SchemaMigration: Sendable, Equatable {
    var table: SchemaTable
    var steps: [Step]
    /// The record takes effect only together with the transaction record right after it (a
    /// custom stage's `didMigrate`): if anything else follows, or nothing, it is void.
    var completedByNextTransaction = false

    enum Step: Sendable, Equatable {
        /// The attribute keeps its id and values under a new name.
        case renameAttribute(entity: String, entityID: UInt32, attributeID: UInt32, from: String, to: String)
        /// The attribute's values are dropped; its id is retired.
        case removeAttribute(entity: String, entityID: UInt32, attributeID: UInt32, name: String)
        /// The entity's models are dropped; its id is retired.
        case removeEntity(entity: String, entityID: UInt32)
        /// Models without a value (or with `nil`) get `value` (optional made required).
        case fill(entity: String, entityID: UInt32, attributeID: UInt32, name: String, value: AttributeValue)
    }

    /// ```
    /// u8 payload version (1, or 2 once a migration wrote the table)
    /// · varint table version · varint next entity id · varint next attribute id
    /// · varint entity count · per entity: varint id, string name, varint attribute count,
    ///   per attribute: varint id, string name, u8 optional, value type
    /// version 2 continues:
    /// · u8 has version identifier [+ i64 major, i64 minor, i64 patch]
    /// · varint removed entity count · per entity: as above (its attributes as they were)
    /// · varint removed attribute count · per attribute: varint entity id, varint id, string name
    /// · u8 flags (bit 0: completed by the next transaction record)
    /// · varint step count · per step: u8 kind, varint entity id, string entity name, then
    ///   1 rename: varint attribute id, string old name, string new name
    ///   2 remove attribute: varint attribute id, string name
    ///   3 remove entity: nothing
    ///   4 fill: varint attribute id, string name, value
    /// ```
    func encoded() -> [UInt8] {
        let version2 = table.needsVersion2 || !steps.isEmpty || completedByNextTransaction
        var writer = ByteWriter()
        writer.write(UInt8(version2 ? 2 : 1))
        writer.writeVarint(UInt64(table.version))
        writer.writeVarint(UInt64(table.nextEntityID))
        writer.writeVarint(UInt64(table.nextAttributeID))
        writer.writeVarint(UInt64(table.entities.count))
        for entity in table.entities { Self.write(entity, into: &writer) }
        guard version2 else { return writer.bytes }
        if let identifier = table.versionIdentifier {
            writer.write(UInt8(1))
            writer.write(Int64(identifier.major))
            writer.write(Int64(identifier.minor))
            writer.write(Int64(identifier.patch))
        } else {
            writer.write(UInt8(0))
        }
        writer.writeVarint(UInt64(table.retiredEntities.count))
        for entity in table.retiredEntities { Self.write(entity, into: &writer) }
        writer.writeVarint(UInt64(table.retiredAttributes.count))
        for attribute in table.retiredAttributes {
            writer.writeVarint(UInt64(attribute.entityID))
            writer.writeVarint(UInt64(attribute.id))
            writer.writeLengthPrefixed(Array(attribute.name.utf8))
        }
        writer.write(UInt8(completedByNextTransaction ? 1 : 0))
        writer.writeVarint(UInt64(steps.count))
        for step in steps {
            switch step {
            case .renameAttribute(let entity, let entityID, let attributeID, let from, let to):
                Self.writeStepHead(1, entity, entityID, into: &writer)
                writer.writeVarint(UInt64(attributeID))
                writer.writeLengthPrefixed(Array(from.utf8))
                writer.writeLengthPrefixed(Array(to.utf8))
            case .removeAttribute(let entity, let entityID, let attributeID, let name):
                Self.writeStepHead(2, entity, entityID, into: &writer)
                writer.writeVarint(UInt64(attributeID))
                writer.writeLengthPrefixed(Array(name.utf8))
            case .removeEntity(let entity, let entityID):
                Self.writeStepHead(3, entity, entityID, into: &writer)
            case .fill(let entity, let entityID, let attributeID, let name, let value):
                Self.writeStepHead(4, entity, entityID, into: &writer)
                writer.writeVarint(UInt64(attributeID))
                writer.writeLengthPrefixed(Array(name.utf8))
                ValueCodec.write(value, into: &writer, entityIDs: [:])
            }
        }
        return writer.bytes
    }

    private static func write(_ entity: SchemaTable.Entity, into writer: inout ByteWriter) {
        writer.writeVarint(UInt64(entity.id))
        writer.writeLengthPrefixed(Array(entity.name.utf8))
        writer.writeVarint(UInt64(entity.attributes.count))
        for attribute in entity.attributes {
            writer.writeVarint(UInt64(attribute.id))
            writer.writeLengthPrefixed(Array(attribute.name.utf8))
            writer.write(UInt8(attribute.isOptional ? 1 : 0))
            ValueCodec.write(attribute.valueType, into: &writer, table: nil)
        }
    }

    private static func writeStepHead(_ kind: UInt8, _ entity: String, _ entityID: UInt32, into writer: inout ByteWriter) {
        writer.write(kind)
        writer.writeVarint(UInt64(entityID))
        writer.writeLengthPrefixed(Array(entity.utf8))
    }

    private static func readEntity(_ reader: inout ByteReader) throws(ByteReaderError) -> SchemaTable.Entity {
        var entity = SchemaTable.Entity(
            id: UInt32(truncatingIfNeeded: try reader.readVarint()),
            name: try ValueCodec.readString(&reader), attributes: [])
        let attributeCount = try reader.readVarint()
        guard attributeCount <= UInt64(reader.remainingByteCount) else { throw .malformed("attribute count") }
        for _ in 0..<attributeCount {
            let id = UInt32(truncatingIfNeeded: try reader.readVarint())
            let name = try ValueCodec.readString(&reader)
            let isOptional = try reader.readByte() != 0
            entity.attributes.append(
                SchemaTable.Attribute(
                    id: id, name: name, valueType: try ValueCodec.readValueType(&reader), isOptional: isOptional))
        }
        return entity
    }

    static func decode(_ bytes: [UInt8]) throws(ByteReaderError) -> SchemaMigration {
        try ByteReader.read(bytes) { reader throws(ByteReaderError) in
            let payloadVersion = try reader.readByte()
            guard payloadVersion == 1 || payloadVersion == 2 else {
                throw .malformed("unknown schema record version \(payloadVersion)")
            }
            var table = SchemaTable()
            table.version = UInt32(truncatingIfNeeded: try reader.readVarint())
            let nextEntityID = UInt32(truncatingIfNeeded: try reader.readVarint())
            let nextAttributeID = UInt32(truncatingIfNeeded: try reader.readVarint())
            table.restoreNextIDs(entity: nextEntityID, attribute: nextAttributeID)
            let entityCount = try reader.readVarint()
            guard entityCount <= UInt64(reader.remainingByteCount) else { throw .malformed("entity count") }
            for _ in 0..<entityCount { table.entities.append(try readEntity(&reader)) }
            var migration = SchemaMigration(table: table, steps: [])
            if payloadVersion == 2 {
                if try reader.readByte() != 0 {
                    let major: Int64 = try reader.read()
                    let minor: Int64 = try reader.read()
                    let patch: Int64 = try reader.read()
                    migration.table.versionIdentifier = Schema.Version(Int(major), Int(minor), Int(patch))
                }
                let retiredCount = try reader.readVarint()
                guard retiredCount <= UInt64(reader.remainingByteCount) else { throw .malformed("removed entity count") }
                for _ in 0..<retiredCount { migration.table.retiredEntities.append(try readEntity(&reader)) }
                let retiredAttributeCount = try reader.readVarint()
                guard retiredAttributeCount <= UInt64(reader.remainingByteCount) else {
                    throw .malformed("removed attribute count")
                }
                for _ in 0..<retiredAttributeCount {
                    migration.table.retiredAttributes.append(
                        SchemaTable.RetiredAttribute(
                            entityID: UInt32(truncatingIfNeeded: try reader.readVarint()),
                            id: UInt32(truncatingIfNeeded: try reader.readVarint()),
                            name: try ValueCodec.readString(&reader)))
                }
                let flags = try reader.readByte()
                guard flags & ~1 == 0 else { throw .malformed("unknown schema record flags \(flags)") }
                migration.completedByNextTransaction = flags & 1 != 0
                let stepCount = try reader.readVarint()
                guard stepCount <= UInt64(reader.remainingByteCount) else { throw .malformed("step count") }
                for _ in 0..<stepCount {
                    let kind = try reader.readByte()
                    let entityID = UInt32(truncatingIfNeeded: try reader.readVarint())
                    let entity = try ValueCodec.readString(&reader)
                    switch kind {
                    case 1:
                        let attributeID = UInt32(truncatingIfNeeded: try reader.readVarint())
                        migration.steps.append(
                            .renameAttribute(
                                entity: entity, entityID: entityID, attributeID: attributeID,
                                from: try ValueCodec.readString(&reader), to: try ValueCodec.readString(&reader)))
                    case 2:
                        let attributeID = UInt32(truncatingIfNeeded: try reader.readVarint())
                        migration.steps.append(
                            .removeAttribute(
                                entity: entity, entityID: entityID, attributeID: attributeID,
                                name: try ValueCodec.readString(&reader)))
                    case 3:
                        migration.steps.append(.removeEntity(entity: entity, entityID: entityID))
                    case 4:
                        let attributeID = UInt32(truncatingIfNeeded: try reader.readVarint())
                        let name = try ValueCodec.readString(&reader)
                        let value = try ValueCodec.read(&reader, entityNames: [:], storeIdentifier: "")
                        migration.steps.append(
                            .fill(entity: entity, entityID: entityID, attributeID: attributeID, name: name, value: value))
                    default:
                        throw .malformed("unknown schema step kind \(kind)")
                    }
                }
            }
            guard reader.isAtEnd else { throw .malformed("\(reader.remainingByteCount) bytes after the schema") }
            try migration.table.checkIdentifiers()
            return migration
        }
    }
}

extension SchemaTable {
    /// The schema this table stores — names and value types; references become relationships
    /// with the nullify rule — or `nil` when it stores none. Options, unique constraints and
    /// delete rules live in code, not in the store (D5): tools that open a store without its
    /// model types read and compact with this, and never save.
    var storedSchema: Schema? {
        guard !entities.isEmpty else { return nil }
        return Schema(
            entities.map { entity in
                var attributes: [Schema.Attribute] = []
                var relationships: [Schema.Relationship] = []
                for attribute in entity.attributes {
                    switch attribute.valueType {
                    case .reference(let destination):
                        relationships.append(Schema.Relationship(attribute.name, destination: destination))
                    case .array(.reference(let destination)):
                        relationships.append(
                            Schema.Relationship(attribute.name, destination: destination, isToMany: true))
                    default:
                        attributes.append(
                            Schema.Attribute(attribute.name, attribute.valueType, isOptional: attribute.isOptional))
                    }
                }
                return Schema.Entity(entity.name, attributes: attributes, relationships: relationships)
            })
    }
}
