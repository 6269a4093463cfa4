from nbtune.events import EventBus, TrialAdded, TrialResult


def test_subscribers_get_events_in_order_until_they_unsubscribe():
    bus = EventBus()
    seen = []
    unsubscribe = bus.subscribe(seen.append)
    bus.publish(TrialAdded(0, {"x": 1}))
    bus.publish(TrialResult(0, {"loss": 1.0}))
    unsubscribe()
    bus.publish(TrialAdded(1, {"x": 2}))
    assert [type(event).__name__ for event in seen] == ["TrialAdded", "TrialResult"]
    assert seen[0].timestamp <= seen[1].timestamp


def test_a_subscriber_that_raises_is_dropped_and_the_others_carry_on(caplog):
    bus = EventBus()
    seen = []

    def broken(event):
        raise RuntimeError("dashboard bug")

    bus.subscribe(broken)
    bus.subscribe(seen.append)
    bus.publish(TrialAdded(0, {}))
    bus.publish(TrialAdded(1, {}))
    assert [event.trial_id for event in seen] == [0, 1]
    drops = [record for record in caplog.records if "dropping subscriber" in record.message]
    assert len(drops) == 1, "dropped once, so the second event never reached it"
