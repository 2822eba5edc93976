"""What lies on an image and moves with it: masks, boxes and keypoints, in Keras' layout.

A geometric op notes how it moved its image; a pipeline given targets moves them the same way
(``shmaug.ops.Compose(..., bounding_box_format=...)``).

- ``moves``: the moves an op notes (a matrix, a displacement field), and how a point, a box
  and a mask follow each;
- ``sample``: one sample's targets through the moves of its image: clipping, dropping,
  padding;
- ``box_moves``: boxes moved, clipped and dropped, one sample's or a worker's task's together
  (once its images are made: one set of numpy calls for the task);
- ``formats``: Keras' box formats and keypoint formats, padding with -1, and the checks a
  loader runs on targets before anything starts;
- ``boxes``: ``Boxes``, boxes that carry their format (as a reader writes them), and the
  check of a pipeline's format against it.
"""
