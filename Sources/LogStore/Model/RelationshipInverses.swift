import Foundation
import Synchronization

/// Keeps both sides of a relationship in step, as SwiftData does: setting `item.trip = trip`
/// appends `item` to `trip.bucketList`, and setting `trip.bucketList` sets (and clears) each
/// item's `trip`. The inverse is the one a `@Relationship(inverse:)` names, on either side.
///
/// Every write below first checks whether the other side already holds the value, so the
/// inverse's own setter, which maintains this side in turn, finds nothing to do: no loop.
public struct RelationshipInverses<Model: PersistentModel>: Sendable {
    /// Called after property `name` of a model changed from `old` to `new` (both as stored).
    typealias Maintainer = @Sendable (Model, Any?, Any?) -> Void

    private let maintainers: [String: Maintainer]

    init(maintainers: [String: Maintainer]) {
        self.maintainers = maintainers
    }

    /// Updates the inverse of property `name` after it changed on `model`, if it has one.
    func maintain(_ name: String, of model: Model, old: Any?, new: Any?) {
        maintainers[name]?(model, old, new)
    }

    /// The inverses of `Model`'s relationships: declared on this side, or declared on the
    /// destination's side naming this property.
    static func make() -> RelationshipInverses {
        var maintainers: [String: Maintainer] = [:]
        for property in Model.schemaProperties where property.relationship != nil {
            guard let makeMaintainer = property.inverseMaintainer else { continue }
            let inverse = property.inverseKeyPath ?? property.destinationType.flatMap {
                declaredInverse(of: property.keyPath as AnyKeyPath, in: $0)
            }
            if let inverse, let maintainer = makeMaintainer(inverse) { maintainers[property.name] = maintainer }
        }
        return RelationshipInverses(maintainers: maintainers)
    }

    /// The key path of the destination's property that declares `keyPath` as its inverse.
    private static func declaredInverse<Destination: PersistentModel>(of keyPath: AnyKeyPath, in destination: Destination.Type)
        -> (AnyKeyPath & Sendable)? {
        Destination.schemaProperties.first { ($0.inverseKeyPath as AnyKeyPath?) == keyPath }?.keyPath
    }

    // MARK: Maintainers

    /// This side is to-one (`item.trip`); the inverse is to-one (`accommodation.trip`) or to-many
    /// (`trip.bucketList`).
    static func toOne<Destination: PersistentModel>(
        _ keyPath: any ReferenceWritableKeyPath<Model, Destination?> & Sendable, inverse: AnyKeyPath,
        destination: Destination.Type
    ) -> Maintainer? {
        if let inverse = inverse as? ReferenceWritableKeyPath<Destination, Model?> {
            nonisolated(unsafe) let inverse = inverse  // an immutable key path, read only
            return { model, old, new in
                if let old = old as? Destination, old !== (new as? Destination), old[keyPath: inverse] === model {
                    old[keyPath: inverse] = nil
                }
                if let new = new as? Destination, new[keyPath: inverse] !== model { new[keyPath: inverse] = model }
            }
        }
        if let inverse = inverse as? ReferenceWritableKeyPath<Destination, [Model]> {
            nonisolated(unsafe) let inverse = inverse  // an immutable key path, read only
            return { model, old, new in
                if let old = old as? Destination, old !== (new as? Destination),
                   old[keyPath: inverse].contains(where: { $0 === model }) {
                    old[keyPath: inverse].removeAll { $0 === model }
                }
                if let new = new as? Destination, !new[keyPath: inverse].contains(where: { $0 === model }) {
                    new[keyPath: inverse].append(model)
                }
            }
        }
        return toOneWithOptionalListInverse(inverse, destination: Destination.self)  // ModelProperty+OptionalToMany.swift
    }

    /// The models `old` held and `new` does not (removed), and the other way round (added).
    /// Linear in the two lists (RelationshipDifference.swift): a nested search made building a list
    /// one `append` at a time cubic (2,000 appends took minutes).
    static func difference<Destination: PersistentModel>(_ old: Any?, _ new: Any?, of type: Destination.Type)
        -> (removed: [Destination], added: [Destination]) {
        RelationshipDifference.between(old as? [Destination] ?? [], new as? [Destination] ?? [])
    }

    /// This side is to-many (`trip.bucketList`); the inverse is to-one (`item.trip`) or to-many.
    static func toMany<Destination: PersistentModel>(
        _ keyPath: any ReferenceWritableKeyPath<Model, [Destination]> & Sendable, inverse: AnyKeyPath,
        destination: Destination.Type
    ) -> Maintainer? {
        if let inverse = inverse as? ReferenceWritableKeyPath<Destination, Model?> {
            nonisolated(unsafe) let inverse = inverse  // an immutable key path, read only
            return { model, old, new in
                let (removed, added) = Self.difference(old, new, of: Destination.self)
                for item in removed where item[keyPath: inverse] === model { item[keyPath: inverse] = nil }
                for item in added where item[keyPath: inverse] !== model { item[keyPath: inverse] = model }
            }
        }
        if let inverse = inverse as? ReferenceWritableKeyPath<Destination, [Model]> {
            nonisolated(unsafe) let inverse = inverse  // an immutable key path, read only
            return { model, old, new in
                let (removed, added) = Self.difference(old, new, of: Destination.self)
                for item in removed where item[keyPath: inverse].contains(where: { $0 === model }) {
                    item[keyPath: inverse].removeAll { $0 === model }
                }
                for item in added where !item[keyPath: inverse].contains(where: { $0 === model }) {
                    item[keyPath: inverse].append(model)
                }
            }
        }
        return toManyWithOptionalListInverse(inverse, destination: Destination.self)  // ModelProperty+OptionalToMany.swift
    }
}

/// The inverses of each model type, made once per type.
private let relationshipInverseCache = Mutex<[ObjectIdentifier: any Sendable]>([:])

extension PersistentModel {
    /// How this type's relationships keep their inverses in step (made once per type).
    static var relationshipInverses: RelationshipInverses<Self> {
        let key = ObjectIdentifier(Self.self)
        if let cached = relationshipInverseCache.withLock({ $0[key] }) as? RelationshipInverses<Self> { return cached }
        let made = RelationshipInverses<Self>.make()
        relationshipInverseCache.withLock { $0[key] = made }
        return made
    }
}
