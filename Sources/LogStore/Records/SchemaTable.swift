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
    var entities: [Entity] = []
    private(set) var nextEntityID: UInt32 = 1
    private(set) var nextAttributeID: UInt32 = 1

    func entity(named name: String) -> Entity? { entities.first { $0.name == name } }
    func entity(id: UInt32) -> Entity? { entities.first { $0.id == id } }

    /// Compares the stored table with the schema in code. Returns the table extended with what
    /// code adds (new entities, new optional attributes, new attributes with a default), or
    /// `nil` when nothing is new. Anything else (a removed or retyped property or entity, a new
    /// required attribute without a default) throws ``LogStoreError/schemaMismatch``.
    func extended(toCover schema: Schema) throws(LogStoreError) -> SchemaTable? {
        var table = self
        var changed = false
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
            for attribute in stored.attributes where entity.property(named: attribute.name) == nil {
                throw .schemaMismatch(
                    entity: entity.name, attribute: attribute.name,
                    reason: "the store has this attribute but the schema in code does not")
            }
            for property in properties {
                if let existing = stored.attributes.first(where: { $0.name == property.name }) {
                    guard existing.valueType == property.valueType, existing.isOptional == property.isOptional else {
                        throw .schemaMismatch(
                            entity: entity.name, attribute: property.name,
                            reason: "stored as \(existing.valueType)\(existing.isOptional ? "?" : ""), "
                                + "declared as \(property.valueType)\(property.isOptional ? "?" : "")")
                    }
                } else {
                    // Older records have no value for it: only an optional or defaulted attribute can be added.
                    guard property.isOptional || property.defaultValue != nil || Self.defaultsToEmpty(property) else {
                        throw .schemaMismatch(
                            entity: entity.name, attribute: property.name,
                            reason: "a new attribute must be optional or have a default value")
                    }
                    table.add(property, toEntityAt: index)
                    changed = true
                }
            }
        }
        for stored in table.entities where schema.entity(named: stored.name) == nil {
            throw .schemaMismatch(
                entity: stored.name, attribute: nil,
                reason: "the store has this entity but the schema in code does not")
        }
        guard changed else { return nil }
        table.version += 1
        return table
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

    /// Ids are unique and below the next ids, names unique: a record that checks out under its
    /// CRC but breaks this was not written by a correct writer, and is refused, not trusted.
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
    }

    // MARK: Record payload

    /// ```
    /// u8 payload version (1) · varint table version · varint next entity id · varint next attribute id
    /// varint entity count · per entity: varint id, string name, varint attribute count,
    ///   per attribute: varint id, string name, u8 optional, value type
    /// ```
    func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.write(UInt8(1))
        writer.writeVarint(UInt64(version))
        writer.writeVarint(UInt64(nextEntityID))
        writer.writeVarint(UInt64(nextAttributeID))
        writer.writeVarint(UInt64(entities.count))
        for entity in entities {
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
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws(ByteReaderError) -> SchemaTable {
        try ByteReader.read(bytes) { reader throws(ByteReaderError) in
            guard try reader.readByte() == 1 else { throw .malformed("unknown schema record version") }
            var table = SchemaTable()
            table.version = UInt32(truncatingIfNeeded: try reader.readVarint())
            table.nextEntityID = UInt32(truncatingIfNeeded: try reader.readVarint())
            table.nextAttributeID = UInt32(truncatingIfNeeded: try reader.readVarint())
            let entityCount = try reader.readVarint()
            guard entityCount <= UInt64(reader.remainingByteCount) else { throw .malformed("entity count") }
            for _ in 0..<entityCount {
                var entity = Entity(
                    id: UInt32(truncatingIfNeeded: try reader.readVarint()),
                    name: try ValueCodec.readString(&reader), attributes: [])
                let attributeCount = try reader.readVarint()
                guard attributeCount <= UInt64(reader.remainingByteCount) else { throw .malformed("attribute count") }
                for _ in 0..<attributeCount {
                    let id = UInt32(truncatingIfNeeded: try reader.readVarint())
                    let name = try ValueCodec.readString(&reader)
                    let isOptional = try reader.readByte() != 0
                    entity.attributes.append(
                        Attribute(
                            id: id, name: name, valueType: try ValueCodec.readValueType(&reader),
                            isOptional: isOptional))
                }
                table.entities.append(entity)
            }
            try table.checkIdentifiers()
            return table
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
