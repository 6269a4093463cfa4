from nbtune.schedulers import Decision, FIFOScheduler
from nbtune.trial import Trial


def test_fifo_lets_every_trial_run_and_picks_the_oldest_waiting():
    scheduler = FIFOScheduler()
    scheduler.setup("loss", "min")
    trials = [Trial(trial_id=i, config={}) for i in range(3)]
    assert scheduler.on_result(trials[0], {"loss": 1e9}) is Decision.CONTINUE
    assert scheduler.choose_trial_to_run(trials[1:]) is trials[1]
    assert scheduler.choose_trial_to_run([]) is None
