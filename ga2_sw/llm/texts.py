"""The fixed texts of ``ga2 llm eval`` and its tests, written for this project (none is from the calibration
prompts in ``scores.PROMPTS``): plain English prose of several kinds, so that the evaluation sees narrative,
explanation, numbers, dialogue and a list."""

__all__ = ["EVAL_TEXT", "GENERATE_PROMPTS"]

EVAL_TEXT = """\
The old lighthouse stood at the end of a narrow stone pier, and for nearly a hundred years its keeper had climbed \
the same spiral stairs every evening to light the lamp. In the winter of 1923 the keeper was a woman named Margaret \
Hale, who had taken the post after her father fell ill. She kept a small notebook in which she wrote down the \
weather, the ships that passed, and anything unusual she saw on the water.

Most entries were short. "Wind from the north-west, strong. Two fishing boats returned early. Fog after midnight." \
But on the night of the fourteenth of February she wrote a full page. A cargo ship had lost its engine in the storm \
and was drifting towards the rocks south of the harbour. Margaret signalled to the village with the lamp, and within \
an hour the lifeboat crew had rowed out through the waves. All twelve sailors were brought home safely.

Why does a lighthouse need a lens at all? A flame or a bulb sends its light in every direction, and most of it \
would be lost to the sky and the ground. The lens gathers that light and bends it into a narrow beam that can be \
seen from thirty kilometres away. Because the lens turns slowly, the beam sweeps across the sea, and each \
lighthouse has its own pattern of flashes, so that a sailor can tell which one he is looking at.

Years later, a young historian visited the village to learn more about the rescue.

"Did she ever talk about that night?" he asked the woman who ran the bakery.

"Not often," she said. "She said she had only done her job. But she kept the notebook until she died, and she \
left it to the school."

The notebook is still there, in a glass case beside the door of the library. Next to it the school has placed a \
list of the things a keeper needed each month:

- forty litres of oil for the lamp,
- two boxes of matches,
- cloths and polish for the brass,
- a new wick every week,
- bread, tea, and a letter from home.

Today the light is automatic. A computer switches it on at sunset and off at dawn, and a sensor reports any fault \
to an office in the city. Nobody climbs the stairs in the evening any more, but on clear nights the beam still \
turns above the harbour, and the children of the village still learn the story of the keeper who watched the sea.
"""

# The prompts of the greedy-generation comparison (64 tokens from each of five fixed prompts).
GENERATE_PROMPTS = (
    "The capital of France is",
    "Water boils at a temperature of",
    "Once upon a time, in a small village by the sea,",
    "The three primary colours are",
    "To make a cup of tea, first",
)
